"""Write ``gavil/models/craft_int8_qparams.json``: the int8 CRAFT detector's activation scales.

``ocr.precision: int8`` (:mod:`gavil.models.craft`) quantizes EasyOCR's CRAFT with PyTorch's FX
graph mode on the ``x86`` engine. Its activation scales come from this script, not from the
images a run reads, so the quantized detector depends only on the commit. Calibration data: the
OCR benchmark set (:mod:`benchmarks._ocrset`) at ``--seed`` 1000, a seed no benchmark measures,
``--images`` 8 (text-free photos and words at 1-3 % cap height, alternating), each at full size
(``ocr.canvas_size`` 2,560 leaves every web image whole), normalised as EasyOCR does; torch's
default ``x86`` observers (histograms, ``reduce_range``).

Run it again only when torch or EasyOCR change how CRAFT traces (the stage then says so) or to
recalibrate on purpose: the file's digest is in the OCR cache's engine label, so new scales never
reuse old detections, and the README's int8 figures must be measured again
(``benchmarks/ocr_limits.py``, ``benchmarks/ocr_cli.py --precisions auto int8``).

Usage (project root, venv):  python benchmarks/ocr_int8_calibrate.py [--images 8] [--seed 1000]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._ocrset import write_ocr_set  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1000)
    args = ap.parse_args()

    from gavil.compat.torchvision_bridge import ensure_torchvision

    ensure_torchvision()
    import easyocr
    import easyocr_en_models
    import torch
    from easyocr.imgproc import normalizeMeanVariance

    from gavil.models.craft import QPARAMS_PATH, calibrate_int8
    from gavil.models.ocr_engine import load_for_ocr

    reader = easyocr.Reader(
        ["en"], gpu=False, model_storage_directory=easyocr_en_models.model_dir(), download_enabled=False, verbose=False
    )
    items = write_ocr_set(Path(tempfile.mkdtemp(prefix="gavil-ocr-calib-")), args.images, args.seed)
    inputs = [
        torch.from_numpy(normalizeMeanVariance(load_for_ocr(it.path, 2560)[..., :3])).permute(2, 0, 1)[None]
        for it in items
    ]
    result = calibrate_int8(reader.detector, inputs)
    result["calibration"] = {
        "script": "benchmarks/ocr_int8_calibrate.py",
        "ocr_set_seed": args.seed,
        "images": [
            {"size": [it.width, it.height], "cap_height_percent": it.cap_height_percent, "font": it.font}
            for it in items
        ],
        "easyocr": easyocr.__version__,
    }
    QPARAMS_PATH.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    print(
        f"wrote {QPARAMS_PATH.relative_to(ROOT)}: {len(result['observers'])} activation observers from {len(items)} images"
    )


if __name__ == "__main__":
    main()
