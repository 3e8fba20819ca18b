"""tools/compare_recipes.py: reading Detectron2's copypaste lines and formatting the results table."""
import importlib.util
import os

_spec = importlib.util.spec_from_file_location("compare_recipes", os.path.join(os.path.dirname(__file__), "..", "tools", "compare_recipes.py"))
compare = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compare)

LOG = """[d2.evaluation.testing]: copypaste: Task: phrase_detection
[d2.evaluation.testing]: copypaste: mAP,mAP_zero_shot,mAP_few_shot,mAP_common,loc_acc,num_phrases_common
[d2.evaluation.testing]: copypaste: 12.8750,5.0600,8.2000,25.3700,64.1700,nan
"""


def test_copypaste_lines_are_read_by_name():
    m = compare._copypaste(LOG)
    assert m["mAP"] == 12.875 and m["mAP_common"] == 25.37 and m["loc_acc"] == 64.17
    assert m["num_phrases_common"] != m["num_phrases_common"]  # nan


def test_table_has_one_row_per_model_in_bucket_order():
    m = compare._copypaste(LOG)
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
