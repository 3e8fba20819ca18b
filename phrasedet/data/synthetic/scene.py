"""Object/image model of the built-in dataset: attributes, the phrase-frequency design, layout, drawing.

An image is a coloured background with 2-4 non-overlapping shapes. Each shape has a colour, a
shape name, a size word (from its drawn size) and a position word (from its centre). Which
(colour, shape) combinations may be drawn in a split is fixed by design so that the
zero-shot / few-shot / common phrase buckets are meaningful (see :data:`HELD_OUT_COMBOS`,
:data:`RARE_COMBOS`, :data:`FREQUENT_COMBOS`).
"""
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
from PIL import Image, ImageDraw

__all__ = [
    "COLOURS", "SHAPES", "BACKGROUNDS", "IMAGE_SIZES", "HELD_OUT_COMBOS", "RARE_COMBOS",
    "FREQUENT_COMBOS", "SMALL_MAX_SIDE", "SceneObject", "Scene", "combo_design", "plan_scene",
    "place_shapes", "render_scene",
]

#: Object colours (RGB) chosen to stay distinguishable on every background.
COLOURS = {
    "red": (220, 30, 30),
    "green": (40, 175, 50),
    "blue": (35, 65, 230),
    "yellow": (245, 220, 35),
    "purple": (145, 50, 195),
    "orange": (250, 140, 20),
    "white": (250, 250, 250),
    "black": (15, 15, 15),
}
SHAPES = ("circle", "square", "triangle", "star", "cross", "diamond")
#: Background colours: the ``scene`` phrases ("a gray background").
BACKGROUNDS = {
    "gray": (128, 128, 128),
    "brown": (125, 88, 52),
    "teal": (20, 110, 120),
    "pink": (235, 160, 190),
}
#: (width, height) and their sampling probabilities.
IMAGE_SIZES = ((128, 96), (96, 128), (128, 128))
IMAGE_SIZE_PROBS = (0.4, 0.3, 0.3)

#: Never drawn in training images: their phrases ("purple star") are zero-shot in val/test.
HELD_OUT_COMBOS = (
    ("purple", "star"), ("orange", "triangle"), ("white", "cross"), ("green", "diamond"),
    ("black", "circle"), ("yellow", "square"), ("blue", "star"), ("red", "cross"),
)
#: Drawn exactly ``rare_quota`` times in training (few-shot phrases).
RARE_COMBOS = (
    ("red", "triangle"), ("green", "cross"), ("blue", "diamond"), ("yellow", "star"),
    ("purple", "circle"), ("orange", "square"), ("white", "diamond"), ("black", "star"),
    ("red", "square"), ("green", "circle"), ("blue", "triangle"), ("yellow", "cross"),
)
#: Common combinations drawn FREQUENT_WEIGHT times as often as the other common ones in training
#: (and EVAL_FREQUENT_WEIGHT times as often as any other combination in val/test).
FREQUENT_COMBOS = (
    ("red", "circle"), ("blue", "square"), ("green", "triangle"), ("yellow", "circle"),
    ("white", "star"), ("black", "square"),
)
FREQUENT_WEIGHT = 6.0
EVAL_FREQUENT_WEIGHT = 3.0

#: Drawn side ranges (pixels, inclusive) of small and large objects; the size word is derived
#: from the drawn box: "small" when its longer side is at most SMALL_MAX_SIDE.
SMALL_SIDES = (14, 21)
LARGE_SIDES = (28, 40)
SMALL_MAX_SIDE = 24
#: Minimum gap in pixels between the squares the shapes are drawn in (so boxes never overlap).
GAP = 3
#: The JPEG quality every built-in image is saved at (the benchmark's and the pretraining split's).
JPEG_QUALITY = 95

ALL_COMBOS = tuple((c, s) for c in COLOURS for s in SHAPES)
COMMON_COMBOS = tuple(c for c in ALL_COMBOS if c not in HELD_OUT_COMBOS and c not in RARE_COMBOS)


def combo_design(combo: tuple) -> str:
    """Design class of a (colour, shape) combination: ``held_out``, ``rare`` or ``common``."""
    combo = tuple(combo)
    if combo in HELD_OUT_COMBOS:
        return "held_out"
    if combo in RARE_COMBOS:
        return "rare"
    return "common"


@dataclass
class SceneObject:
    """One drawn shape.

    ``box`` is the drawn pixel extent ``(x0, y0, x1, y1)``, 0-based and inclusive.
    """

    colour: str
    shape: str
    side: int
    x: int = 0
    y: int = 0
    box: tuple = (0, 0, 0, 0)

    @property
    def combo(self) -> tuple:
        return (self.colour, self.shape)

    @property
    def size(self) -> str:
        """``"small"`` or ``"large"``, from the drawn box."""
        x0, y0, x1, y1 = self.box
        return "small" if max(x1 - x0 + 1, y1 - y0 + 1) <= SMALL_MAX_SIDE else "large"

    @property
    def center(self) -> tuple:
        x0, y0, x1, y1 = self.box
        return ((x0 + x1 + 1) / 2.0, (y0 + y1 + 1) / 2.0)

    def box_xyxy(self) -> list:
        """Continuous 0-based box ``[x0, y0, x1 + 1, y1 + 1]`` (floats)."""
        x0, y0, x1, y1 = self.box
        return [float(x0), float(y0), float(x1 + 1), float(y1 + 1)]


@dataclass
class Scene:
    """An image plan: size, background and placed objects."""

    width: int
    height: int
    background: str
    objects: list = field(default_factory=list)

    def record(self) -> dict:
        """``background`` and ``objects`` (colour, shape, size, position, continuous box) as
        ``ground_truth.json`` stores them: what :mod:`.facts` checks captions against."""
        return {"background": self.background,
                "objects": [{"colour": o.colour, "shape": o.shape, "size": o.size, "position": self.position(o),
                             "box": o.box_xyxy()} for o in self.objects]}

    def position(self, obj: SceneObject) -> str:
        """Position word of an object: ``left``, ``right``, ``top``, ``bottom`` or ``center``."""
        cx, cy = obj.center
        if cx < 0.36 * self.width:
            return "left"
        if cx > 0.64 * self.width:
            return "right"
        if cy < 0.36 * self.height:
            return "top"
        if cy > 0.64 * self.height:
            return "bottom"
        return "center"


def _pick(rng: np.random.Generator, items: tuple, weights: Optional[np.ndarray] = None):
    idx = int(rng.choice(len(items), p=weights)) if weights is not None else int(rng.integers(len(items)))
    return items[idx]


def _combo_pool(split: str) -> tuple:
    """Combinations and sampling probabilities for a split's non-forced objects."""
    if split == "train":
        combos = COMMON_COMBOS
        w = np.array([FREQUENT_WEIGHT if c in FREQUENT_COMBOS else 1.0 for c in combos])
    else:
        combos = ALL_COMBOS
        w = np.array([EVAL_FREQUENT_WEIGHT if c in FREQUENT_COMBOS else 1.0 for c in combos])
    return combos, w / w.sum()


def _place(rng: np.random.Generator, side: int, width: int, height: int, placed: list) -> Optional[tuple]:
    """Top-left corner of a ``side`` square keeping GAP pixels from ``placed`` squares, or None."""
    if side + 2 > width or side + 2 > height:
        return None
    for _ in range(60):
        x = int(rng.integers(1, width - side))
        y = int(rng.integers(1, height - side))
        if all(x + side + GAP <= px or px + ps + GAP <= x or y + side + GAP <= py or py + ps + GAP <= y
               for px, py, ps in placed):
            return x, y
    return None


def plan_scene(rng: np.random.Generator, split: str, forced: tuple = ()) -> Scene:
    """Sample an image plan.

    Parameters
    ----------
    rng : numpy.random.Generator
        The split's generator.
    split : str
        ``"train"`` draws only common combinations (plus ``forced``); other splits draw from
        all combinations uniformly, held-out ones included.
    forced : tuple of (colour, shape)
        Combinations that must appear (the training quota of rare combinations).

    Returns
    -------
    Scene
        With 2-4 placed objects (objects that cannot be placed are dropped, forced ones last).
    """
    width, height = IMAGE_SIZES[int(rng.choice(len(IMAGE_SIZES), p=IMAGE_SIZE_PROBS))]
    background = _pick(rng, tuple(BACKGROUNDS))
    combos, probs = _combo_pool(split)
    n = max(int(rng.integers(2, 5)), min(len(forced), 4))
    wanted = list(forced[:4])
    if len(wanted) + 2 <= n and rng.random() < 0.3:  # a duplicate pair: "two red circles"
        dup = _pick(rng, combos, probs)
        wanted += [dup, dup]
    elif len(wanted) + 2 <= n and rng.random() < 0.3:  # a same-colour pair: "two red shapes"
        colour = _pick(rng, tuple(COLOURS))
        shapes = [s for s in SHAPES if (colour, s) in combos]
        pair = rng.choice(len(shapes), size=2, replace=False)
        wanted += [(colour, shapes[int(i)]) for i in pair]
    while len(wanted) < n:
        wanted.append(_pick(rng, combos, probs))
    scene = Scene(width, height, background)
    placed = []
    for colour, shape in wanted:
        large = rng.random() < 0.5
        lo, hi = LARGE_SIDES if large else SMALL_SIDES
        side = int(rng.integers(lo, hi + 1))
        pos = _place(rng, side, width, height, placed)
        if pos is None:  # retry small, then give up on this object
            side = int(rng.integers(SMALL_SIDES[0], SMALL_SIDES[1] + 1))
            pos = _place(rng, side, width, height, placed)
        if pos is None:
            continue
        placed.append((pos[0], pos[1], side))
        scene.objects.append(SceneObject(colour, shape, side, pos[0], pos[1]))
    return scene


def _shape_mask(obj: SceneObject, width: int, height: int) -> Image.Image:
    """Binary 'L' mask of one shape drawn in its square."""
    mask = Image.new("L", (width, height), 0)
    draw = ImageDraw.Draw(mask)
    x, y, s = obj.x, obj.y, obj.side
    x1, y1 = x + s - 1, y + s - 1
    cx, cy = x + (s - 1) / 2.0, y + (s - 1) / 2.0
    if obj.shape == "circle":
        draw.ellipse([x, y, x1, y1], fill=255)
    elif obj.shape == "square":
        draw.rectangle([x, y, x1, y1], fill=255)
    elif obj.shape == "triangle":
        draw.polygon([(x, y1), (x1, y1), (cx, y)], fill=255)
    elif obj.shape == "diamond":
        draw.polygon([(cx, y), (x1, cy), (cx, y1), (x, cy)], fill=255)
    elif obj.shape == "cross":
        t = max(4, s // 3)
        a = x + (s - t) // 2
        b = y + (s - t) // 2
        draw.rectangle([x, b, x1, b + t - 1], fill=255)
        draw.rectangle([a, y, a + t - 1, y1], fill=255)
    elif obj.shape == "star":
        r_out, r_in = (s - 1) / 2.0, 0.45 * (s - 1) / 2.0
        pts = []
        for k in range(10):
            ang = -np.pi / 2 + k * np.pi / 5
            r = r_out if k % 2 == 0 else r_in
            pts.append((cx + r * np.cos(ang), cy + r * np.sin(ang)))
        draw.polygon(pts, fill=255)
    else:
        raise ValueError(f"unknown shape {obj.shape!r}")
    return mask


def place_shapes(scene: Scene) -> list:
    """The drawn mask (bool [H, W]) of every object of a planned scene, in order; sets every
    object's ``box`` to its drawn pixel extent. Draws nothing random: the boxes of a scene are known
    without rendering its pixels (:func:`render_scene` draws the same masks)."""
    masks = []
    for obj in scene.objects:
        mask = np.asarray(_shape_mask(obj, scene.width, scene.height)) > 0
        ys, xs = np.nonzero(mask)
        obj.box = (int(xs.min()), int(ys.min()), int(xs.max()), int(ys.max()))
        masks.append(mask)
    return masks


def render_scene(scene: Scene, rng: np.random.Generator) -> Image.Image:
    """Draw a scene; sets every object's ``box`` to its drawn pixel extent (:func:`place_shapes`).

    The background and the objects get a small colour jitter and the whole image mild noise,
    all from ``rng``.
    """
    w, h = scene.width, scene.height
    base = np.array(BACKGROUNDS[scene.background], dtype=np.float32) + rng.uniform(-10, 10, 3)
    canvas = np.broadcast_to(base, (h, w, 3)).copy()
    for obj, mask in zip(scene.objects, place_shapes(scene)):
        colour = np.array(COLOURS[obj.colour], dtype=np.float32) + rng.uniform(-12, 12, 3)
        canvas[mask] = colour
    canvas += rng.normal(0.0, 4.0, canvas.shape)
    return Image.fromarray(np.clip(np.rint(canvas), 0, 255).astype(np.uint8), "RGB")
