"""Image helpers of the SummaryWriter (torch's tensorboard/_utils.py): figures to arrays,
a batch of images to one grid, any image layout to HWC, a batch of videos to frames."""
import numpy as np


def figure_to_image(figures, close=True):
    """A matplotlib figure as a uint8 CHW array (a list of figures: NCHW). Needs
    matplotlib, imported on use as in PyTorch (ImportError without it)."""
    import matplotlib.backends.backend_agg as backend_agg
    import matplotlib.pyplot as plt

    def rgb_chw(figure):
        canvas = backend_agg.FigureCanvasAgg(figure)
        canvas.draw()
        width, height = figure.canvas.get_width_height()
        rgba = np.frombuffer(canvas.buffer_rgba(), dtype=np.uint8).reshape(height, width, 4)
        if close:
            plt.close(figure)
        return rgba[:, :, :3].transpose(2, 0, 1)

    if isinstance(figures, list):
        return np.stack([rgb_chw(f) for f in figures])
    return rgb_chw(figures)


def _prepare_video(V):
    """[batch, time, C, H, W] -> [time, H', W', C]: each frame shows the batch as a grid,
    the batch padded with black videos to a power of two (uint8 becomes float in [0, 1])."""
    batch, frames, channels, height, width = V.shape
    if V.dtype == np.uint8:
        V = np.float32(V) / 255.0
    if batch & (batch - 1) or batch == 0:
        extra = 2 ** batch.bit_length() - batch
        V = np.concatenate((V, np.zeros((extra, frames, channels, height, width))), axis=0)
    rows = 2 ** ((batch.bit_length() - 1) // 2)
    cols = V.shape[0] // rows
    grid = V.reshape(rows, cols, frames, channels, height, width)
    return grid.transpose(2, 0, 4, 1, 5, 3).reshape(frames, rows * height, cols * width,
                                                    channels)


def make_grid(I, ncols=8):
    """A batch of images (N1HW or N3HW) as one 3HW canvas, ncols to a row, row by row
    (the last row's empty places black)."""
    if not isinstance(I, np.ndarray):
        raise AssertionError("plugin error, should pass numpy array here")
    if I.shape[1] == 1:
        I = np.repeat(I, 3, axis=1)
    if I.ndim != 4 or I.shape[1] != 3:
        raise AssertionError("Input should be a 4D numpy array with 3 channels")
    count, _, height, width = I.shape
    ncols = min(count, ncols)
    nrows = -(-count // ncols)
    blanks = np.zeros((nrows * ncols - count, 3, height, width), dtype=I.dtype)
    tiles = np.concatenate([I, blanks]).reshape(nrows, ncols, 3, height, width)
    return tiles.transpose(2, 0, 3, 1, 4).reshape(3, nrows * height, ncols * width)


def convert_to_HWC(tensor, input_format):
    """An array laid out as input_format (2 to 4 distinct letters of NCHW) as an HWC image
    with 3 channels: a batch becomes a grid, grey is repeated into RGB."""
    if len(set(input_format)) != len(input_format):
        raise AssertionError("You can not use the same dimension shorthand twice. "
                             f"input_format: {input_format}")
    if len(tensor.shape) != len(input_format):
        raise AssertionError("size of input tensor and input format are different. "
                             f"tensor shape: {tensor.shape}, input_format: {input_format}")
    fmt = input_format.upper()
    if len(fmt) == 4:
        return make_grid(tensor.transpose([fmt.find(c) for c in "NCHW"])).transpose(1, 2, 0)
    if len(fmt) == 3:
        hwc = tensor.transpose([fmt.find(c) for c in "HWC"])
        return np.repeat(hwc, 3, axis=2) if hwc.shape[2] == 1 else hwc
    if len(fmt) == 2:
        hw = tensor.transpose([fmt.find(c) for c in "HW"])
        return np.stack([hw, hw, hw], 2)
    return None
