import pandas as pd

from gavil.io import validate
from schemas.profanity import ConceptFilter
from stages.filter_profanity import ProfanityFilter, filter_concepts


def test_every_concept_keeps_status_and_reason():
    pf = ProfanityFilter(extra_words=["butt"], allow_words=["pot"])
    concepts = pd.DataFrame({"concept": ["cat", "butt", "shit", "pot", "fast food", "hell hound"]})
    out = validate(filter_concepts(concepts, pf), ConceptFilter).set_index("concept")
    assert out.loc["cat", "status"] == "ok" and pd.isna(out.loc["cat", "reason"])
    assert out.loc["butt", "status"] == "profane" and "extra_words" in out.loc["butt", "reason"]
    assert out.loc["shit", "status"] == "profane" and "better-profanity" in out.loc["shit", "reason"]
    assert out.loc["pot", "status"] == "ok"  # allowed explicitly
    assert out.loc["fast food", "status"] == "ok"
    assert out.loc["hell hound", "status"] == "profane" and "'hell'" in out.loc["hell hound", "reason"]
    assert len(out) == 6  # nothing dropped
