"""Summary protocol buffers of the SummaryWriter's media (torch's tensorboard/summary.py):
images (PNG, through Pillow), images with boxes drawn on, videos (GIF, through moviepy),
audio (WAV) and meshes (the mesh plugin)."""
import io
import json
import tempfile
import wave

import numpy as np
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.compat.proto.tensor_pb2 import TensorProto
from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
from tensorboard.plugins.mesh import metadata as mesh_metadata
from tensorboard.plugins.mesh.plugin_data_pb2 import MeshPluginData

from ._convert_np import make_np
from ._utils import _prepare_video, convert_to_HWC


def _to_uint8(array):
    """Image values as uint8: uint8 as they are, anything else taken as [0, 1] (x255),
    clipped to [0, 255]."""
    scale = 1 if array.dtype == np.uint8 else 255
    return (array.astype(np.float32) * scale).clip(0, 255).astype(np.uint8)


def image(tag, tensor, rescale=1, dataformats="NCHW"):
    """A Summary of one image (a batch: a grid) laid out as dataformats."""
    hwc = convert_to_HWC(make_np(tensor), dataformats)
    return Summary(value=[Summary.Value(tag=tag, image=make_image(_to_uint8(hwc),
                                                                  rescale=rescale))])


def image_boxes(tag, tensor_image, tensor_boxes, rescale=1, dataformats="CHW", labels=None):
    """A Summary of an image with boxes (N x 4: xmin, ymin, xmax, ymax) drawn in red."""
    hwc = convert_to_HWC(make_np(tensor_image), dataformats)
    encoded = make_image(_to_uint8(hwc), rescale=rescale, rois=make_np(tensor_boxes),
                         labels=labels)
    return Summary(value=[Summary.Value(tag=tag, image=encoded)])


def _draw_box(picture, xmin, ymin, xmax, ymax, label, color="black", text_color="black",
              width=2):
    from PIL import ImageDraw, ImageFont

    font = ImageFont.load_default()
    pen = ImageDraw.Draw(picture)
    corners = [(xmin, ymin), (xmin, ymax), (xmax, ymax), (xmax, ymin), (xmin, ymin)]
    pen.line(corners, width=width, fill=color)
    if label:
        left, top, right, bottom = font.getbbox(label)
        text_w, text_h = right - left, bottom - top
        margin = np.ceil(0.05 * text_h)
        pen.rectangle([(xmin, ymax - text_h - 2 * margin), (xmin + text_w, ymax)], fill=color)
        pen.text((xmin + margin, ymax - text_h - margin), label, fill=text_color, font=font)
    return picture


def draw_boxes(disp_image, boxes, labels=None):
    """Draws each box (a row xmin, ymin, xmax, ymax of boxes) on the PIL image, in red,
    with its label when labels are given."""
    for i in range(boxes.shape[0]):
        disp_image = _draw_box(disp_image, boxes[i, 0], boxes[i, 1], boxes[i, 2],
                               boxes[i, 3], None if labels is None else labels[i],
                               color="Red")
    return disp_image


def make_image(tensor, rescale=1, rois=None, labels=None):
    """A Summary.Image of an HWC uint8 array: PNG-encoded after drawing boxes (rois) and
    resizing by rescale; its height and width are the array's."""
    from PIL import Image

    height, width, channels = tensor.shape
    picture = Image.fromarray(tensor)
    if rois is not None:
        picture = draw_boxes(picture, rois, labels=labels)
    picture = picture.resize((int(width * rescale), int(height * rescale)),
                             Image.Resampling.LANCZOS)
    with io.BytesIO() as out:
        picture.save(out, format="PNG")
        encoded = out.getvalue()
    return Summary.Image(height=height, width=width, colorspace=channels,
                         encoded_image_string=encoded)


def video(tag, tensor, fps=4):
    """A Summary of a batch of videos (N, T, C, H, W) as one animated GIF (without a usable
    moviepy: a message printed and a value with the tag only, as in PyTorch)."""
    frames = _to_uint8(_prepare_video(make_np(tensor)))
    return Summary(value=[Summary.Value(tag=tag, image=make_video(frames, fps))])


def make_video(tensor, fps):
    """A Summary.Image holding the GIF of frames (T, H, W, C), or None (printing why)
    when moviepy or its editor module cannot be imported."""
    try:
        import moviepy  # noqa: F401
    except ImportError:
        print("add_video needs package moviepy")
        return None
    try:
        from moviepy import editor as mpy
    except ImportError:
        print("moviepy is installed, but can't import moviepy.editor.",
              "Some packages could be missing [imageio, requests]")
        return None
    _, height, width, channels = tensor.shape
    clip = mpy.ImageSequenceClip(list(tensor), fps=fps)
    with tempfile.NamedTemporaryFile(suffix=".gif") as f:
        try:
            clip.write_gif(f.name, verbose=False, logger=None)
        except TypeError:       # older moviepy: progress_bar, or neither argument
            try:
                clip.write_gif(f.name, verbose=False, progress_bar=False)
            except TypeError:
                clip.write_gif(f.name, verbose=False)
        f.seek(0)
        encoded = f.read()
    return Summary.Image(height=height, width=width, colorspace=channels,
                         encoded_image_string=encoded)


def audio(tag, tensor, sample_rate=44100):
    """A Summary of one channel of sound in [-1, 1] (clipped, with a printed warning) as
    16-bit WAV."""
    samples = make_np(tensor).squeeze()
    if abs(samples).max() > 1:
        print("warning: audio amplitude out of range, auto clipped.")
        samples = samples.clip(-1, 1)
    if samples.ndim != 1:
        raise AssertionError("input tensor should be 1 dimensional.")
    pcm = (samples * np.iinfo(np.int16).max).astype("<i2")
    with io.BytesIO() as out:
        with wave.open(out, "wb") as wav:
            wav.setnchannels(1)
            wav.setsampwidth(2)
            wav.setframerate(sample_rate)
            wav.writeframes(pcm.data)
        encoded = out.getvalue()
    sound = Summary.Audio(sample_rate=sample_rate, num_channels=1,
                          length_frames=pcm.shape[-1], encoded_audio_string=encoded,
                          content_type="audio/wav")
    return Summary(value=[Summary.Value(tag=tag, audio=sound)])


def _mesh_value(name, display_name, description, tensor, content_type, components,
                json_config):
    array = make_np(tensor) if not isinstance(tensor, (list, tuple)) else np.asarray(tensor)
    meta = mesh_metadata.create_summary_metadata(name, display_name, content_type, components,
                                            array.shape, description,
                                            json_config=json_config)
    proto = TensorProto(dtype="DT_FLOAT", float_val=array.reshape(-1).tolist(),
                        tensor_shape=TensorShapeProto(
                            dim=[TensorShapeProto.Dim(size=d) for d in array.shape[:3]]))
    return Summary.Value(tag=mesh_metadata.get_instance_name(name, content_type), tensor=proto,
                         metadata=meta)


def mesh(tag, vertices, colors, faces, config_dict, display_name=None, description=None):
    """A Summary of a mesh or point cloud: one value each for vertices, faces and colors
    (those given; each [batch, N, 3]), with the three.js config_dict as JSON."""
    json_config = "{}" if config_dict is None else json.dumps(config_dict, sort_keys=True)
    parts = [(t, kind) for t, kind in ((vertices, MeshPluginData.VERTEX),
                                       (faces, MeshPluginData.FACE),
                                       (colors, MeshPluginData.COLOR)) if t is not None]
    components = mesh_metadata.get_components_bitmask([kind for _, kind in parts])
    return Summary(value=[_mesh_value(tag, display_name, description, t, kind, components,
                                      json_config) for t, kind in parts])
