"""Stage ``aflite``: WinoGrande's AfLite (Sakaguchi et al. 2020, §4, Algorithm 1) over the selected
instances — a *report* of which instances simple linear models solve from precomputed embeddings.

Unit = instance. Each of ``n_classifiers`` logistic regressions per phase (C = 1, L2; all of a
phase's fitted together by :mod:`gavil.models.batched_logistic`, or one by one with scikit-learn
under ``solver: sklearn``: the same optimum, the same flags) learns
(cue, candidate) -> associated from the pair rows of a random ``m`` instances (split by instance;
with ``image_disjoint`` the held-out instances share no candidate with the training ones) and
predicts every other remaining instance: its top-K candidates by score (K = its number of
associations). Credit = held-out Jaccard (or exact match). score(e) = mean credit over the
classifiers that held e out. Each phase flags the top-``k`` instances with score >= tau (ties by
instance id); phases repeat until fewer than k are flagged or fewer than m remain. m and k are
absolute counts or the paper's fractions (15,000 and 500 of 44,000: 0.3409, 0.0114).

Determinism: every draw is keyed by instance id, never by row position: an instance's rank in a
classifier's split (and in the KL's random reduction, and whether ``plant`` marks it) is
``splitmix64(blake2b(instance_uid) ^ key(seed, purpose, phase, classifier))``
(:func:`~gavil.models.keyed.draw_keys`), so it depends on the instance's id and the seed alone, not on the row order nor on which other
instances are present. Instances (and their pair rows) are sorted by id before any fit or sum,
and every prediction is credited by instance position, so a permuted input gives bit-identical
scores, probes and KL (tests/stages/aflite/test_aflite.py shuffles every table the stage reads: selection,
instances, embedding cache).

Report by source: counts, flags, flag rate and mean score per dataset (game / swow_baseline) and
per batch (``release:<file>`` for the released files, ``raw:<batch folder>`` for new collections,
from the ``instances`` table's ``source_file``). Audit option ``aflite.plant``: a spurious feature
(one extra pair-feature column, ``strength`` on the association rows of a keyed ``fraction`` of the
instances, 0 elsewhere) and the precision and recall of the flags against the planted instances,
overall, per dataset and per batch.

Progress (stderr): the model load and the embedding say when they start and every 10 s while they
run; each phase prints its counts, the elapsed time and the solver's iterations.

Assessment (WinoGrande §4): KL divergence between the label-conditional histograms of the 1-D PCA
projection of the pair features, before, after AfLite, and after a random reduction of the same
size. Probes: the *cue-free* features (candidate only) run one phase of scoring; the text model is
itself image-free (the *image-free* probe is the main run then; with an open_clip model the
image-free probe needs the text side alone and is reported as not run).

Report only by default: nothing downstream reads it, and the export is unchanged. With
``aflite.write_debiased`` the kept instances are written to ``data/export/debiased.csv`` (like
``winogrande_debiased`` beside ``winogrande_xl``); otherwise that file holds the header alone.
WinoGAViL does not choose test instances with a model (its §2.2, §4): do not replace the benchmark
with the debiased split.

Modules: :mod:`.core` (the algorithm: splits, fits, phases, KL), :mod:`.report` (by dataset and
batch, the ``plant`` audit), :mod:`.stage` (the entry: tables in and out, probes);
:mod:`gavil.models.keyed` (the id-keyed draws).
"""

from stages.aflite.core import SKLEARN_TOL, SOLVER_TOL, Result, aflite, kl_assessment, predictability, splits
from stages.aflite.report import batch_of, group_counts, plant_feature, plant_mask, plant_report
from stages.aflite.stage import Metrics, run

__all__ = [
    "SKLEARN_TOL",
    "SOLVER_TOL",
    "Metrics",
    "Result",
    "aflite",
    "batch_of",
    "group_counts",
    "kl_assessment",
    "plant_feature",
    "plant_mask",
    "plant_report",
    "predictability",
    "run",
    "splits",
]
