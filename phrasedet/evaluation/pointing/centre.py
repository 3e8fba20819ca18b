"""The centre baseline: every query of an image is answered with the image's centre."""
import numpy as np

__all__ = ["centre_points", "query_centre_points"]


def centre_points(image_sizes) -> np.ndarray:
    """Image sizes [N, 2] as ``(height, width)`` -> centres [N, 2] as ``(x, y) = (W / 2, H / 2)``
    (continuous pixel coordinates, float64)."""
    sizes = np.asarray(image_sizes, dtype=np.float64)
    if sizes.ndim != 2 or sizes.shape[1] != 2:
        raise ValueError(f"image sizes must have shape [N, 2] as (height, width), got {sizes.shape}")
    return sizes[:, ::-1] / 2.0


def query_centre_points(image_sizes, query_image) -> np.ndarray:
    """The centre of each query's image [Q, 2]: ``centre_points(image_sizes)[query_image]``, in
    column-major order (contiguous x and y columns, for the hit rules)."""
    centres, index = centre_points(image_sizes), np.asarray(query_image, dtype=np.int64)
    out = np.empty((len(index), 2), np.float64, order="F")
    for axis in (0, 1):
        np.take(centres[:, axis], index, out=out[:, axis])
    return out
