"""Files of the embedding projector (torch's tensorboard/_embedding.py): the vectors
(tensors.tsv), their labels (metadata.tsv), a sprite of their images (sprite.png) and the
projector_config.pbtxt that lists the embeddings of a log directory."""
import io
import math

import numpy as np
from tensorboard.compat import tf
from tensorboard.plugins.projector.projector_config_pb2 import EmbeddingInfo

from ._convert_np import make_np
from ._utils import make_grid


def _join(a, b):
    # tensorboard's TensorFlow stub and TensorFlow itself name the join differently
    if hasattr(tf.io.gfile, "join"):
        return tf.io.gfile.join(a, b)
    return tf.io.gfile.get_filesystem(a).join(a, b)


def _write(path, data):
    with tf.io.gfile.GFile(path, "wb") as f:
        f.write(tf.compat.as_bytes(data))


def make_tsv(metadata, save_path, metadata_header=None):
    """metadata.tsv: one label a line, or (with a header) one tab-separated row a line."""
    if not metadata_header:
        lines = [str(x) for x in metadata]
    else:
        if len(metadata_header) != len(metadata[0]):
            raise AssertionError(
                "len of header must be equal to the number of columns in metadata")
        lines = ["\t".join(str(e) for e in row) for row in [metadata_header] + metadata]
    _write(_join(save_path, "metadata.tsv"), "\n".join(lines) + "\n")


def make_sprite(label_img, save_path):
    """sprite.png: the label images (N, C, H, W; values in [0, 1]) in a square grid."""
    from PIL import Image

    per_row = math.ceil(label_img.size(0) ** 0.5)
    grid_chw = make_grid(make_np(label_img), ncols=per_row)
    side = grid_chw.shape[2]
    square = np.zeros((side, side, 3))
    square[:grid_chw.shape[1]] = grid_chw.transpose(1, 2, 0)
    picture = Image.fromarray(np.uint8((square * 255).clip(0, 255)))
    with io.BytesIO() as buf:
        picture.save(buf, format="PNG")
        _write(_join(save_path, "sprite.png"), buf.getvalue())


def get_embedding_info(metadata, label_img, subdir, global_step, tag):
    """The projector's EmbeddingInfo of one add_embedding call."""
    info = EmbeddingInfo()
    info.tensor_name = f"{tag}:{str(global_step).zfill(5)}"
    info.tensor_path = _join(subdir, "tensors.tsv")
    if metadata is not None:
        info.metadata_path = _join(subdir, "metadata.tsv")
    if label_img is not None:
        info.sprite.image_path = _join(subdir, "sprite.png")
        info.sprite.single_image_dim.extend([label_img.size(3), label_img.size(2)])
    return info


def write_pbtxt(save_path, contents):
    """projector_config.pbtxt in save_path."""
    _write(_join(save_path, "projector_config.pbtxt"), contents)


def make_mat(matlist, save_path):
    """tensors.tsv: one vector a line, its numbers tab-separated."""
    with tf.io.gfile.GFile(_join(save_path, "tensors.tsv"), "wb") as f:
        for row in matlist:
            f.write(tf.compat.as_bytes("\t".join(str(v.item()) for v in row) + "\n"))
