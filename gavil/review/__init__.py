"""Image review: the reviewers' decisions file (:mod:`gavil.review.decisions`) and the page that writes it
(:mod:`gavil.review.web`, served by ``gavil review``); see docs/review.md."""
