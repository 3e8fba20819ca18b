"""Utilities: drawing phrase detections (:mod:`.visualize`)."""
from .visualize import (
    build_test_resize,
    draw_phrase_detections,
    phrase_colors,
    predict_phrases,
    save_test_visualizations,
    upscale_factor,
)

__all__ = [
    "build_test_resize",
    "draw_phrase_detections",
    "phrase_colors",
    "predict_phrases",
    "save_test_visualizations",
    "upscale_factor",
]
