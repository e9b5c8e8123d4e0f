"""Crowd-platform task files (``gavil game hits``): for labs that recruit on a crowd platform
(Amazon Mechanical Turk, Turkle, ...) instead of running the live game.

The platform turns each row of an input CSV into a task (``${column}`` placeholders in the HTML
template) and returns batch results with ``Input.<column>`` and ``Answer.<form field>``
columns: exactly the layout the crowd-batch import reads (``annotations.crowd``: its column map
names which input column and form field hold what). Files written to ``out``:

- ``creation_tasks.csv``: one row per playable candidate set: ``set_id``, the candidates column
  (a JSON list of concept names, read back by the import) and ``payload`` (what the template
  shows: base64 of JSON with the image URLs, names and K range; never pasted into HTML).
- ``creation.html``: two cues over the set, each with its K images (form fields named by the map:
  ``cue1``/``associations1``/``cue2``/``associations2``; associations as JSON lists of names).
- ``solve_tasks.csv`` + ``solve.html`` (with ``creations``: a creation batch-results CSV): one
  row per cue of an accepted assignment: ``instance_id`` = ``<AssignmentId>:<1|2>`` as the
  import names them, and ``payload`` (images, names, K and the cue); the answer field holds the
  selection as a JSON list of names.
- ``images/<sha256><ext>``: the images, to upload where ``image_url`` points.

No rival model runs on a crowd platform: fool-the-AI stays empty (the ``score_candidates`` stage
scores these instances afterwards).
"""

from __future__ import annotations

import base64
import csv
import json
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from gavil.domain.vocabulary import K_LIMITS
from gavil.errors import GavilError
from gavil.game.launch import game_sets
from gavil.game.rules import CandidateSet
from gavil.io import csv_writer
from gavil.params import Params

_TEMPLATE = """<!-- {title}: a crowd-platform task template written by `gavil game hits`.
     The platform fills ${{payload}} from the task CSV: base64 of JSON (images, names, K, cue), so no
     value is ever pasted into the HTML; everything is shown with textContent. -->
<div id="gavil-task" data-payload="${{payload}}">
  <p>{help}</p>
  <p id="gavil-cue-line" hidden>Cue: <b id="gavil-cue"></b></p>
  <p>Select <span id="gavil-k"></span> images.</p>
  {fields}
</div>
<script>
(function () {{
  var task = JSON.parse(decodeURIComponent(escape(atob(document.getElementById("gavil-task").dataset.payload))));
  document.getElementById("gavil-k").textContent = task.k_min === task.k_max ? task.k_max : task.k_min + " to " + task.k_max;
  if (task.cue) {{
    document.getElementById("gavil-cue").textContent = task.cue;
    document.getElementById("gavil-cue-line").hidden = false;
  }}
  {groups}.forEach(function (g) {{
    var field = document.getElementsByName(g)[0], grid = document.createElement("div"), chosen = [];
    grid.style.cssText = "display:flex;flex-wrap:wrap;gap:6px;margin:6px 0";
    task.images.forEach(function (url, i) {{
      var img = document.createElement("img");
      img.src = url;
      img.alt = "image " + (i + 1);
      img.style.cssText = "width:140px;height:140px;object-fit:cover;border:4px solid #fff;cursor:pointer";
      img.addEventListener("click", function () {{
        var at = chosen.indexOf(task.names[i]);
        if (at >= 0) chosen.splice(at, 1); else chosen.push(task.names[i]);
        img.style.borderColor = at >= 0 ? "#fff" : "#06c";
        field.value = JSON.stringify(chosen);
      }});
      grid.appendChild(img);
    }});
    field.parentNode.insertBefore(grid, field);
  }});
}})();
</script>
"""


def _payload(**data: object) -> str:
    return base64.b64encode(json.dumps(data, ensure_ascii=False).encode()).decode()


def _field(name: str) -> str:
    """The form field of a crowd column (``Answer.cue1`` -> ``cue1``; ``Input.x`` -> ``x``)."""
    return name.split(".", 1)[1] if "." in name else name


def _copy_images(paths: dict[str, Path], out: Path) -> dict[str, str]:
    (out / "images").mkdir(parents=True, exist_ok=True)
    names = {}
    for sha, src in paths.items():
        names[sha] = f"{sha}{src.suffix}"
        shutil.copy(src, out / "images" / names[sha])
    return names


def write_hits(params: Params, out: Path, image_url: str = "", creations: Path | None = None) -> list[Path]:
    """Write the task files (module docstring) under ``out``; returns the paths written.

    Raises:
        GavilError: ``annotations.crowd.columns`` maps a field to a column without an
            ``Input.``/``Answer.`` prefix, or ``creations`` does not exist.
    """
    cols = params.annotations.crowd.columns
    for key, col in cols.items():
        if not col.startswith(("Input.", "Answer.")):
            raise GavilError(f"annotations.crowd.columns.{key} = {col!r}: crowd columns start with Input. or Answer.")
    sets, paths = game_sets(Path("."))
    out.mkdir(parents=True, exist_ok=True)
    files = _copy_images(paths, out)

    def url(sha: str) -> str:
        return image_url + files[sha]

    written = _write_creation_tasks(sets, cols, out, url)
    if creations is None:
        return written
    if not creations.is_file():
        raise GavilError(f"{creations} does not exist (a creation batch-results CSV)")
    accepted = set(params.annotations.crowd.accepted_status)
    return [*written, *_write_solve_tasks(sets, cols, accepted, creations, out, url)]


def _write_creation_tasks(
    sets: Sequence[CandidateSet], cols: Mapping[str, str], out: Path, url: Callable[[str], str]
) -> list[Path]:
    """``creation_tasks.csv`` (one row per candidate set: ``set_id``, its candidates as JSON under
    the ``candidates`` column, the payload) and the ``creation.html`` template under ``out``; ``cols``
    is ``annotations.crowd.columns``, ``url`` an image's URL by sha256. Returns the two paths."""
    cands = _field(cols["candidates"])
    written = [out / "creation_tasks.csv", out / "creation.html"]
    with open(written[0], "w", newline="", encoding="utf-8") as f:
        w = csv_writer(f)
        w.writerow(["set_id", cands, "payload"])
        for s in sets:
            lo, hi = K_LIMITS[len(s.candidates)]
            imgs = [url(h) for h in s.shas]
            payload = _payload(images=imgs, names=list(s.candidates), k_min=lo, k_max=hi)
            w.writerow([s.set_id, json.dumps(list(s.candidates), ensure_ascii=False), payload])
    fields = []
    for i in (1, 2):
        cue, assoc = _field(cols[f"cue_{i}"]), _field(cols[f"associations_{i}"])
        fields.append(
            f'<p>Cue {i} (one word): <input name="{cue}" required pattern="\\S{{2,}}"></p>'
            f'<p>Images for cue {i}:</p><input type="hidden" name="{assoc}" value="[]">'
        )
    assocs = [_field(cols[f"associations_{i}"]) for i in (1, 2)]
    written[1].write_text(
        _TEMPLATE.format(
            title="creation task",
            help="Give two different one-word cues. For each, click the images it relates to, so that "
            "other people find them but an AI model would not. Do not use the images' names.",
            fields="\n  ".join(fields),
            groups=json.dumps(assocs),
        )
    )
    return written


def _write_solve_tasks(
    sets: Sequence[CandidateSet],
    cols: Mapping[str, str],
    accepted: set[str],
    creations: Path,
    out: Path,
    url: Callable[[str], str],
) -> list[Path]:
    """``solve_tasks.csv`` (two rows per accepted creation of this project's sets in the batch
    results ``creations``: ``<AssignmentId>:<1|2>`` and the payload, K as the spymaster marked) and
    the ``solve.html`` template under ``out``; other rows are counted on stderr. ``accepted``: the
    ``AssignmentStatus`` values that count. Returns the two paths."""
    by_names = {tuple(s.candidates): s for s in sets}
    solve_csv, solve_html = out / "solve_tasks.csv", out / "solve.html"
    with (
        open(creations, newline="", encoding="utf-8-sig") as f,
        open(solve_csv, "w", newline="", encoding="utf-8") as g,
    ):
        w = csv_writer(g)
        w.writerow([_field(cols["instance_id"]), "payload"])
        skipped = 0
        for row in csv.DictReader(f):
            try:
                cs = by_names.get(tuple(json.loads(row[cols["candidates"]])))
                ks = [len(json.loads(row[cols[f"associations_{i}"]] or "[]")) for i in (1, 2)]
            except (json.JSONDecodeError, TypeError, KeyError):
                cs = None
            if row.get("AssignmentStatus") not in accepted or cs is None:
                skipped += 1  # not accepted, or not one of this project's sets: no solve task
                continue
            imgs = [url(h) for h in cs.shas]
            for i, k in zip((1, 2), ks):
                cue = row[cols[f"cue_{i}"]]
                data = _payload(images=imgs, names=list(cs.candidates), k_min=k, k_max=k, cue=cue)
                w.writerow([f"{row['AssignmentId']}:{i}", data])
    if skipped:
        print(
            f"game hits: {skipped} creation row(s) not turned into solve tasks (status or candidates)", file=sys.stderr
        )
    sel = _field(cols["selection"])
    solve_html.write_text(
        _TEMPLATE.format(
            title="solve task",
            help="Click the images the cue relates to.",
            fields=f'<input type="hidden" name="{sel}" value="[]">',
            groups=json.dumps([sel]),
        )
    )
    return [solve_csv, solve_html]
