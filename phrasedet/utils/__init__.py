"""Utilities: drawing phrase detections (:mod:`.visualize`) and text heatmaps (:mod:`.heatmap_pictures`)."""
from .heatmap_pictures import draw_heatmap, pointing_heatmaps, save_pointing_visualizations
from .visualize import (
    build_test_resize,
    draw_phrase_detections,
    phrase_colors,
    predict_phrases,
    save_test_visualizations,
    upscale_factor,
)

__all__ = [
    "draw_heatmap",
    "pointing_heatmaps",
    "save_pointing_visualizations",
    "build_test_resize",
    "draw_phrase_detections",
    "phrase_colors",
    "predict_phrases",
    "save_test_visualizations",
    "upscale_factor",
]
