"""Fact labels of a scene (the probe's and the pretraining's targets) and the oracle image
representation, by hand and against the obvious computation on the generated data
(phrasedet/data/synthetic/labels.py, oracle.py)."""
import json
import os

import numpy as np
import pytest

from phrasedet.data.image_features import read_feature_row
from phrasedet.data.synthetic.facts import holds, object_descs
from phrasedet.data.synthetic.ground_truth import load_ground_truth, split_scenes
from phrasedet.data.synthetic.labels import (LABEL_GROUPS, OBJECT_LABEL_GROUPS, group_columns, label_groups, label_matrix,
                                             label_names, object_label_groups, object_label_matrix, object_label_names,
                                             scene_labels)
from phrasedet.data.synthetic.oracle import CODES, ORACLE_DIM, object_codes, oracle_maps, oracle_vector, write_oracle_features


def obj(colour, shape, size="small", position="left", box=(0, 0, 20, 20)):
    return {"colour": colour, "shape": shape, "size": size, "position": position, "box": list(box)}


SCENE = {"background": "teal", "objects": [obj("red", "circle", box=(0, 0, 20, 20)),
                                           obj("red", "circle", "large", "right", box=(90, 60, 126, 96)),
                                           obj("blue", "star", "small", "center", box=(50, 40, 64, 54))]}


def test_the_groups_and_their_sizes():
    sizes = {g: len(c) for g, c in group_columns().items()}
    assert sizes == {"background": 4, "colour": 8, "shape": 6, "colour_shape": 48, "count": 3 + 8 + 6 + 48,
                     "colour_position": 40, "shape_position": 30}
    assert len(label_names()) == len(label_groups()) == 201
    assert list(dict.fromkeys(label_groups())) == list(LABEL_GROUPS)
    with pytest.raises(ValueError, match=r"^unknown label group 'size'; the groups are \('background', "):
        label_names(["size"])


def test_labels_of_a_hand_scene():
    on = {n for n, v in zip(label_names(), scene_labels(SCENE)) if v}
    assert on == {"background teal", "red", "blue", "circle", "star", "red circle", "blue star", "3 objects", "2+ red",
                  "2+ circle", "2+ red circle", "red at left", "red at right", "blue at center", "circle at left",
                  "circle at right", "star at center"}
    assert (label_matrix([SCENE, SCENE]) == scene_labels(SCENE)).all()
    assert scene_labels(SCENE).dtype == label_matrix([SCENE]).dtype == np.uint8  # as documented: [L] and [N, L] uint8
    two, four = {**SCENE, "objects": SCENE["objects"][:2]}, {**SCENE, "objects": SCENE["objects"] + [obj("blue", "star")]}
    counts = [[n for n, v in zip(label_names(["count"]), scene_labels(s, ["count"])) if v.item() and "objects" in n]
              for s in (two, SCENE, four)]
    assert counts == [["2 objects"], ["3 objects"], ["4 objects"]]


def test_object_labels_of_a_hand_scene():
    """One row per object: its colour, its shape, "large" for the large one, its colour-shape pair."""
    names = object_label_names()
    assert len(names) == 8 + 6 + 1 + 48 and list(dict.fromkeys(object_label_groups())) == list(OBJECT_LABEL_GROUPS)
    rows = object_label_matrix(SCENE["objects"])
    assert rows.shape == (3, 63) and rows.dtype == np.uint8
    assert [{n for n, v in zip(names, row) if v} for row in rows] == [{"red", "circle", "red circle"},
                                                                       {"red", "circle", "large", "red circle"},
                                                                       {"blue", "star", "blue star"}]
    assert object_label_matrix([]).shape == (0, 63)
    with pytest.raises(ValueError, match=r"^unknown object label group 'background'; the groups are \('colour', "):
        object_label_names(["background"])


def test_the_oracle_codes_every_desc_once():
    assert len(CODES) == len(set(CODES)) == 9 * 7 * 3 * 6 and ORACLE_DIM == len(CODES) + 4
    codes = object_codes(SCENE["objects"][0])
    assert len(set(codes)) == 16 and [CODES[c] for c in codes] == object_descs(SCENE["objects"][0])
    v = oracle_vector(SCENE)
    assert v.dtype == np.float32 and v.sum() == 3 * 16 + 1 and v[CODES.index(())] == 3
    assert v[CODES.index((("colour", "red"), ("shape", "circle")))] == 2
    assert v[CODES.index((("colour", "red"), ("position", "left"), ("shape", "circle"), ("size", "small")))] == 1
    assert v[len(CODES) + 2] == 1  # teal, the third background


def test_oracle_maps_give_each_cell_the_object_containing_its_centre():
    maps = oracle_maps(SCENE, 128, 96, 4)  # cells of 32 x 24 px, centres at x 16, 48, 80, 112 and y 12, 36, 60, 84
    small, large, star = (sorted(object_codes(o)) for o in SCENE["objects"])
    teal = [len(CODES) + 2]
    # the large circle [90, 126] x [60, 96] contains one centre, (112, 84): y = 60 is on its edge, not inside;
    # the star [50, 64] x [40, 54] contains none: it holds the cell of its own centre (57, 47)
    expected = {(0, 0): small, (1, 1): star, (3, 3): large}
    assert maps.dtype == np.float32 and np.unique(maps).tolist() == [0.0, 1.0]
    for i in range(4):
        for j in range(4):
            assert sorted(np.flatnonzero(maps[:, i, j])) == expected.get((i, j), teal), (i, j)
    # a centre in two boxes: the one overlapping the cell more; in none: the background, however much is covered
    two = {"background": "gray", "objects": [obj("red", "circle", box=(0, 0, 10, 10)), obj("blue", "star", box=(12, 0, 32, 20))]}
    assert sorted(np.flatnonzero(oracle_maps(two, 32, 32, 1)[:, 0, 0])) == sorted(object_codes(two["objects"][1]))
    nested = {"background": "gray", "objects": [obj("red", "circle", box=(10, 10, 20, 20)), obj("blue", "star", box=(0, 0, 32, 20))]}
    assert sorted(np.flatnonzero(oracle_maps(nested, 32, 32, 1)[:, 0, 0])) == sorted(object_codes(nested["objects"][1]))
    sliver = {"background": "gray", "objects": [obj("red", "circle", box=(0, 0, 30, 15.5)), obj("blue", "star", box=(40, 40, 60, 60))]}
    maps = oracle_maps(sliver, 64, 64, 2)  # centres (16, 16), (48, 16), (16, 48), (48, 48): the circle covers 48 % of a cell
    assert [sorted(np.flatnonzero(maps[:, i, j])) for i, j in ((0, 0), (1, 1))] == [sorted(object_codes(o)) for o in sliver["objects"]]
    assert [np.flatnonzero(maps[:, i, j]).tolist() for i, j in ((0, 1), (1, 0))] == [[len(CODES)]] * 2  # gray


def test_a_centre_in_several_boxes_goes_to_the_most_overlapping_one_against_a_pixel_count():
    """The generated scenes never overlap (their shapes keep a gap), so the rule's tie-break is
    checked on random overlapping boxes against the obvious computation: each cell's pixels
    counted in each box that contains its centre, the most (the first on a tie) owning it, -1
    where none does; then each box left without a cell takes the cell of its own centre."""
    from phrasedet.data.synthetic.oracle import _cell_owners

    rng = np.random.default_rng(0)
    width, height, grid, ties = 64, 48, 4, 0
    cw, ch = width // grid, height // grid
    for _ in range(300):
        boxes = [(x0, y0, min(width, x0 + int(rng.integers(4, 40))), min(height, y0 + int(rng.integers(4, 30))))
                 for x0, y0 in zip(rng.integers(0, 48, 4).tolist(), rng.integers(0, 36, 4).tolist())]
        expected = np.full((grid, grid), -1)
        for i in range(grid):
            for j in range(grid):
                cx, cy = (j + 0.5) * cw, (i + 0.5) * ch
                inside = [k for k, (x0, y0, x1, y1) in enumerate(boxes) if x0 < cx < x1 and y0 < cy < y1]
                cell = np.zeros((height, width), bool)
                cell[i * ch:(i + 1) * ch, j * cw:(j + 1) * cw] = True
                pixels = [int(cell[y0:y1, x0:x1].sum()) for x0, y0, x1, y1 in boxes]
                if inside:
                    expected[i, j] = min(k for k in inside if pixels[k] == max(pixels[k] for k in inside))
                    ties += len(inside) > 1
        for k, (x0, y0, x1, y1) in enumerate(boxes):
            if k not in expected:
                expected[int((y0 + y1) / 2 // ch), int((x0 + x1) / 2 // cw)] = k
        assert _cell_owners([{"box": list(b)} for b in boxes], width, height, grid).tolist() == expected.tolist(), boxes
    assert ties > 200  # the random boxes exercise the tie-break (253 times)
    lone = _cell_owners([{"box": [0, 0, 10, 10]}], 64, 48, 2)  # the background is -1
    assert lone.dtype == np.int64 and lone.tolist() == [[0, -1], [-1, -1]]


def test_the_spatial_oracle_is_an_upper_bound_of_the_pointing_game(builtin_root):
    """The cells of a test query's objects, pointed at as DSVE-loc's evaluation points (the first
    maximum's cell centre), hit the query's box by the strict rule: every one of the built-in
    test split's queries (the rule before, a cell to every object touching it, hit 23 %), except
    where an object of the same four attributes elsewhere in the image holds the same code (which
    no text can tell apart)."""
    import phrasedet  # noqa: F401  (registers the datasets)
    from detectron2.data import DatasetCatalog

    from phrasedet.evaluation.pointing.heatmaps import points_of_heatmaps
    from phrasedet.evaluation.pointing.hit_rules import strict_hits

    images = load_ground_truth(builtin_root)
    heatmaps, sizes, boxes, twins = [], [], [], []
    for record in DatasetCatalog.get("builtin_flickr30k_pointing_test"):
        scene = images[str(record["image_id"])]
        maps = oracle_maps(scene, record["width"], record["height"], 16)
        for query in record["queries"]:
            x0, y0, x1, y1 = query["bbox"]
            named = [o for o in scene["objects"] if x0 <= o["box"][0] and y0 <= o["box"][1] and o["box"][2] <= x1 and o["box"][3] <= y1]
            assert named, query["query_id"]
            heatmaps.append(np.max([maps[object_codes(o)].min(axis=0) for o in named], axis=0))
            sizes.append((record["height"], record["width"]))
            boxes.append(query["bbox"])
            twins.append(any(o is not n and object_descs(o) == object_descs(n) for n in named for o in scene["objects"]))
    assert len(boxes) == 1501
    hits = strict_hits(points_of_heatmaps(np.stack(heatmaps), sizes, "centre"), np.array(boxes))
    assert (hits | np.array(twins)).all(), f"{(~hits & ~np.array(twins)).sum()} of {len(hits)} missed"
    assert 0 < (~hits).sum() <= sum(twins)  # the twins' misses: 15 of 1,501


@pytest.fixture(scope="module")
def oracle_dir(builtin_root, tmp_path_factory):
    import phrasedet  # noqa: F401  (registers the datasets)

    out = str(tmp_path_factory.mktemp("oracle"))
    dirs = write_oracle_features(out, ["builtin_flickr30k_captions_test", "builtin_flickr30k_pointing_test"], 8,
                                 load_ground_truth(builtin_root))
    # checked here, not in one test: mutation testing credits a module fixture to the first test that uses it
    assert dirs == {"global": os.path.join(out, "global"), "maps": os.path.join(out, "maps")}
    assert sorted(os.listdir(dirs["maps"])) == sorted(os.listdir(dirs["global"])) == [
        f"builtin_flickr30k_{s}_test.{e}" for s in ("captions", "pointing") for e in ("npy", "txt")]
    for name in ("captions", "pointing"):  # maps of 0 and 1 stored as bytes, a quarter of float32's size
        assert np.load(os.path.join(dirs["maps"], f"builtin_flickr30k_{name}_test.npy"), mmap_mode="r").dtype == np.uint8
    return out


def test_an_image_missing_from_the_ground_truth_is_named(builtin_root, tmp_path):
    from detectron2.data import DatasetCatalog

    import phrasedet  # noqa: F401  (registers the datasets)

    images = load_ground_truth(builtin_root)
    ids = [r["image_id"] for r in DatasetCatalog.get("builtin_flickr30k_pointing_test")]
    gone = {str(ids[0]), str(ids[-1])}
    with pytest.raises(KeyError) as error:
        write_oracle_features(str(tmp_path), ["builtin_flickr30k_pointing_test"], 4,
                              {k: v for k, v in images.items() if k not in gone})
    n = sum(str(i) in gone for i in ids)
    assert error.value.args[0] == (f"builtin_flickr30k_pointing_test: image {ids[0]!r} is not in the built-in ground truth "
                                   f"({n} missing)")


def test_the_global_oracle_states_exactly_the_object_facts_that_hold(builtin_root, oracle_dir):
    """Every desc dimension of every test image, against holds() on the scene: the obvious computation."""
    images = load_ground_truth(builtin_root)
    with open(os.path.join(oracle_dir, "global", "builtin_flickr30k_captions_test.txt"), encoding="utf-8") as f:
        ids = f.read().split()
    assert sorted(ids) == sorted(split_scenes(builtin_root, "test", images)[0])
    path = os.path.join(oracle_dir, "global", "builtin_flickr30k_captions_test.npy")
    for row, image_id in enumerate(ids):
        v, scene = read_feature_row(path, row), images[image_id]
        found = [bool(v[k]) for k in range(len(CODES))]
        assert found == [holds(("object", d), scene) for d in CODES], image_id
        assert v[len(CODES):].tolist() == [float(b == scene["background"]) for b in ("gray", "brown", "teal", "pink")]


def test_the_spatial_oracle_holds_every_object_somewhere(builtin_root, oracle_dir):
    images = load_ground_truth(builtin_root)
    path = os.path.join(oracle_dir, "maps", "builtin_flickr30k_pointing_test.npy")
    with open(path[:-4] + ".txt", encoding="utf-8") as f:
        ids = f.read().split()
    for row, image_id in enumerate(ids):
        maps = read_feature_row(path, row)
        assert maps.shape == (ORACLE_DIM, 8, 8) and set(maps.sum(0).ravel().tolist()) <= {1.0, 16.0}
        pooled = maps.max(axis=(1, 2))
        for o in images[image_id]["objects"]:  # each object, even a 14 px one, covers most of some cell
            assert pooled[object_codes(o)].all(), (image_id, o)


def test_an_object_off_the_diagonal_holds_the_cell_its_centre_falls_in():
    # 128 x 96 at grid 4: cells of 32 x 24 px; the box [100, 110] x [10, 20] contains no cell centre, and its
    # centre (105, 15) lies in row 0, column 3 (the transposed cell would be row 3, column 0)
    scene = {"background": "gray", "objects": [obj("red", "circle", box=(100, 10, 110, 20))]}
    maps = oracle_maps(scene, 128, 96, 4)
    held = [(i, j) for i in range(4) for j in range(4) if maps[object_codes(scene["objects"][0]), i, j].all()]
    assert held == [(0, 3)]


def test_on_the_generated_scenes_every_object_holds_a_cell_with_its_centre_or_a_centre_inside_it(builtin_root):
    from phrasedet.data.synthetic.oracle import _cell_owners

    fallbacks, grid = 0, 8  # cells of 16 px: the smallest objects (14 px) contain no cell centre
    for image_id, image in load_ground_truth(builtin_root).items():
        w, h, objects = image["width"], image["height"], image["objects"]
        owners = _cell_owners(objects, w, h, grid)
        cw, ch = w / grid, h / grid
        for k, o in enumerate(objects):
            x0, y0, x1, y1 = o["box"]
            cells = list(zip(*np.nonzero(owners == k)))
            assert cells, (image_id, k)
            for i, j in cells:
                cx, cy = (j + 0.5) * cw, (i + 0.5) * ch
                if not (x0 < cx < x1 and y0 < cy < y1):  # a fallback cell: the object's own centre lies in it
                    fallbacks += 1
                    mx, my = (x0 + x1) / 2, (y0 + y1) / 2
                    assert j * cw <= mx < (j + 1) * cw and i * ch <= my < (i + 1) * ch, (image_id, k, grid)
    assert fallbacks > 0  # the generated data exercise the rule
