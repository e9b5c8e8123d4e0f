"""Image review: the reviewers' decisions file (:mod:`gavil.review.decisions`) and the page that writes it
(:mod:`gavil.review.web`, served by ``gavil review``); see docs/review.md."""

#: The ``ocr`` statuses of the images a reviewer sees: those the OCR let through (the page's queue,
#: and the images the optional safety score scores).
REVIEWABLE = ("accepted", "review_pending", "review_rejected")
