"""tools/compare_recipes.py: the results tables, and the phrase-filtering rows read from an
evaluation's results and log."""
import importlib.util
import os

_spec = importlib.util.spec_from_file_location("compare_recipes", os.path.join(os.path.dirname(__file__), "..", "tools", "compare_recipes.py"))
compare = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compare)

METRICS = {"mAP": 12.875, "mAP_zero_shot": 5.06, "mAP_few_shot": 8.2, "mAP_common": 25.37, "loc_acc": 64.17,
           "num_phrases_common": float("nan")}


def test_table_has_one_row_per_model_in_bucket_order():
    m = METRICS
    text = compare.format_table([("cite_cca", m, "9.0 min"), ("cite", {**m, "mAP_zero_shot": float("nan")}, "3.1 min")])
    lines = text.splitlines()
    assert lines[0] == "| model | zero-shot mAP | few-shot mAP | common mAP | mAP (mean of buckets) | localization acc. | wall time of this run |"
    assert lines[2] == "| cite_cca | 5.06 | 8.20 | 25.37 | 12.88 | 64.2 % | 9.0 min |"
    assert lines[3].startswith("| cite | n/a | 8.20 |")


def _m(zero, few, common, loc):
    return {"mAP_zero_shot": zero, "mAP_few_shot": few, "mAP_common": common, "mAP": (zero + few + common) / 3, "loc_acc": loc}


PER_SEED = {  # config: [seed 0, seed 1]
    "cite_cca": [_m(9.0, 15.0, 24.0, 70.0), _m(7.0, 13.0, 26.0, 72.0)],
    "cite": [_m(4.0, 9.0, 29.0, 66.0), _m(8.0, 10.0, 27.0, 68.0)],
    "cca": [_m(10.0, 17.0, 30.0, 68.0), _m(10.0, 17.0, 30.0, 68.0)],
}


def test_seed_table_gives_each_seed_and_the_mean_and_sample_sd():
    lines = compare.format_seed_table(PER_SEED, [0, 1]).splitlines()
    assert lines[0].startswith("| model | mAP, seed 0 | mAP, seed 1 | mean zero-shot mAP |")
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    # overall 16.00 and 15.33; zero-shot mean 8, sd sqrt(2) = 1.41; loc 71.0 +- 1.41
    assert cells == ["cite_cca", "16.00", "15.33", "8.00 ± 1.41", "14.00 ± 1.41", "25.00 ± 1.41", "15.67 ± 0.47", "71.0 % ± 1.41"]
    assert lines[4].split("|")[4].strip() == "10.00 ± 0.00"


def test_init_differences_pair_each_cca_config_with_its_random_init_seed_by_seed():
    lines = compare.format_init_differences(PER_SEED, [0, 1]).splitlines()
    assert len(lines) == 3  # cca has no random-init partner
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    # seed 0: +5, +6, -5, overall +2, loc +4; seed 1: -1, +3, -1, overall +0.33, loc +4
    assert cells == ["cite_cca - cite", "+2.00 (1/2 won)", "+4.50 (2/2 won)", "-3.00 (0/2 won)", "+1.17 (2/2 won)",
                     "+4.00 (2/2 won)", "+2.00, +0.33 (seeds 0, 1)"]


def test_config_seed_reads_the_config_and_the_overrides():
    assert compare.config_seed("cite_cca", []) == 0
    assert compare.config_seed("cite_cca", ["SEED", "7"]) == 7


def test_filtering_rows_give_the_unfiltered_row_then_each_top_n_with_its_recall_and_added_time(monkeypatch):
    calls = []

    def fake_eval_only(config, root, name, extra):
        n = int(extra[extra.index("TEST.PHRASE_FILTER.TOP_N") + 1])
        calls.append((config, name, extra))
        log = (f"Phrase filter of x: top {n} of 3000 sentences (s) for 150 images; model built in 1.2 s, sentences embedded "
               f"in 0.8 s, {30 + n / 25:.1f} ms per test image, 40.1 allowed tokens per image on average\n"
               "Total inference pure compute time: 0:01:46 (0.712345 s / iter per device, on 1 devices)\n")
        return log, {"phrase_detection": {**METRICS, "mAP": 11.0 + n / 100, "filter_recall": 97.24},
                     "phrase_detection_unfiltered": METRICS}

    monkeypatch.setattr(compare, "_eval_only", fake_eval_only)
    retrieval = {"config": "r.yaml", "weights": "r.pth", "opts": ["MODEL.RETRIEVAL.IMAGE_INPUT", "features"]}
    rows = compare.run_filtering("cite_cca", "out", [75, 100], retrieval, ["SEED", "1"])
    assert [r[0] for r in rows] == ["cite_cca, no filtering", "cite_cca, filtered by the top 75 sentences",
                                    "cite_cca, filtered by the top 100 sentences"]
    assert rows[0][1] is METRICS and rows[1][1]["mAP"] == 11.75 and rows[2][1]["mAP"] == 12.0
    assert rows[1][2] == "recall 97.2 %; +33 ms per image (detector 712 ms) + 0.8 s once"
    assert [c[1] for c in calls] == ["filter_top75", "filter_top100"]
    keys = calls[0][2]
    assert keys[keys.index("TEST.PHRASE_FILTER.RETRIEVAL_OPTS") + 1] == "['MODEL.RETRIEVAL.IMAGE_INPUT', 'features']"
    assert keys[-2:] == ["SEED", "1"]


def test_ppa_footer_counts_test_instances_per_bucket_without_and_with_ppa():
    plain = {"num_instances_zero_shot": 140, "num_instances_few_shot": 840, "num_instances_common": 287}
    ppa = {"num_instances_zero_shot": 146, "num_instances_few_shot": 1387, "num_instances_common": 550}
    lines = compare.format_ppa_footer(plain, ppa).splitlines()
    assert lines[2] == "| plain | 140 | 840 | 287 | 1,267 |"
    assert lines[3] == "| PPA-augmented | 146 | 1,387 | 550 | 2,083 |"
