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
