"""phrasedet/engine/init_comparison.py: CCA init minus random init per bucket, and the verdict on
paper 003's central finding."""
import math

import pytest

from phrasedet.engine.init_comparison import compare_initializations, format_comparison


def _metrics(zero, few, common, loc):
    return {"mAP_zero_shot": zero, "mAP_few_shot": few, "mAP_common": common,
            "mAP": (zero + few + common) / 3, "loc_acc": loc, "num_phrases_common": 10}


CCA = _metrics(6.59, 14.18, 26.05, 72.6)      # the README's cite_cca row
RANDOM = _metrics(3.52, 9.52, 28.90, 65.6)    # and its cite row


def test_differences_are_per_bucket_and_the_verdict_names_wins_and_losses():
    c = compare_initializations(CCA, RANDOM, "CITEClassifier")
    d = c["cca_minus_random"]
    assert d["mAP_zero_shot"] == pytest.approx(3.07) and d["mAP_few_shot"] == pytest.approx(4.66)
    assert d["mAP_common"] == pytest.approx(-2.85) and d["loc_acc"] == pytest.approx(7.0)
    assert d["mAP"] == pytest.approx((3.07 + 4.66 - 2.85) / 3)  # 1.6267
    assert c["cca_init"]["mAP_common"] == 26.05 and c["random_init"]["loc_acc"] == 65.6
    assert "num_phrases_common" not in c["cca_init"]
    assert c["verdict"].startswith(
        "CCA initialization beat random initialization on zero-shot (+3.07) and few-shot (+4.66) phrases, "
        "did not beat it on common (-2.85); overall +1.63 mAP.")
    assert c["verdict"].endswith("is REPRODUCED (better overall and on zero- and few-shot phrases).")
    assert c["paper"]["cca"] == (9.6, 11.5, 17.1, 12.7) and c["paper"]["random"][3] == 6.0


@pytest.mark.parametrize("cca, outcome", [
    (_metrics(4.0, 10.0, 20.0, 70.0), "PARTLY REPRODUCED"),   # rare buckets up, overall down (-2.3)
    (_metrics(3.0, 20.0, 40.0, 70.0), "NOT REPRODUCED"),      # zero-shot down, overall up
    (_metrics(3.52, 20.0, 40.0, 70.0), "NOT REPRODUCED"),     # a tie is not a win
])
def test_the_verdict_needs_zero_and_few_shot_gains_and_an_overall_gain(cca, outcome):
    verdict = compare_initializations(cca, RANDOM)["verdict"]
    assert f"is {outcome} (" in verdict


def test_a_bucket_lost_everywhere_reads_plainly():
    verdict = compare_initializations(_metrics(1.0, 2.0, 3.0, 50.0), RANDOM)["verdict"]
    assert verdict.startswith("CCA initialization did not beat random initialization on zero-shot (-2.52) and "
                              "few-shot (-7.52) and common (-25.90); overall -11.98 mAP.")


def test_an_empty_bucket_is_not_a_win():
    cca = {**CCA, "mAP_zero_shot": math.nan}
    c = compare_initializations(cca, RANDOM)
    assert math.isnan(c["cca_minus_random"]["mAP_zero_shot"])
    assert "did not beat it on zero-shot (n/a)" in c["verdict"] and "NOT REPRODUCED" in c["verdict"]


def test_results_without_the_buckets_are_refused():
    with pytest.raises(KeyError, match=r"lack \['mAP_common'\]"):
        compare_initializations({k: v for k, v in CCA.items() if k != "mAP_common"}, RANDOM)


def test_table_rows_values_and_paper_rows():
    lines = format_comparison(compare_initializations(CCA, RANDOM, "CITEClassifier")).splitlines()
    assert [cell.strip() for cell in lines[0].strip("|").split("|")] == \
        ["mAP (%)", "zero-shot", "few-shot", "common", "overall", "loc. acc."]
    assert [cell.strip() for cell in lines[2].strip("|").split("|")] == ["CCA init", "6.59", "14.18", "26.05", "15.61", "72.60"]
    assert [cell.strip() for cell in lines[4].strip("|").split("|")] == ["CCA - random", "+3.07", "+4.66", "-2.85", "+1.63", "+7.00"]
    assert [cell.strip() for cell in lines[7].strip("|").split("|")] == ["paper 003, CCA - random", "+5.00", "+6.80", "+8.30", "+6.70", "-"]
    assert lines[8] == "(paper 003: Table IV, Flickr30K Entities)"
    assert lines[9].startswith("CCA initialization beat")


def test_no_paper_rows_for_a_classifier_the_paper_did_not_compare():
    lines = format_comparison(compare_initializations(CCA, RANDOM, "QARCNNClassifier")).splitlines()
    assert len(lines) == 6 and lines[4].startswith("| CCA - random") and lines[5].startswith("CCA initialization")
