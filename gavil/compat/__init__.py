"""Compatibility with the environment the project is installed into (not the pipeline's logic).

- :mod:`gavil.compat.torchvision_bridge`: lets ``import torchvision`` (and so ``open_clip`` and
  ``easyocr``) work where a CPU-only torch sits beside a CUDA build of torchvision; does nothing
  where the two builds match.
- :mod:`gavil.compat.pandera_dask`: spares a stage process pandera's import of ``dask.dataframe``
  (no table here is a dask frame).
- ``build_hook.py``: the packaging step (a hatchling build hook, not part of the installed package)
  that installs the bridge's start-up line, ``winogavil_torchvision.pth``, into site-packages.
"""
