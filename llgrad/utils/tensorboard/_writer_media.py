"""SummaryWriter's add_* methods of images, figures, video, audio, meshes, the model
graph and embeddings (a base class of SummaryWriter, which supplies _get_file_writer)."""
import os

from google.protobuf import text_format
from tensorboard.compat import tf
from tensorboard.plugins.projector.projector_config_pb2 import ProjectorConfig

from ._convert_np import make_np
from ._embedding import get_embedding_info, make_mat, make_sprite, make_tsv, write_pbtxt
from ._graph import graph
from ._utils import figure_to_image
from .summary_media import audio, image, image_boxes, mesh, video


class MediaMethods:
    """The media add_* methods of SummaryWriter."""

    def _get_file_writer(self):
        raise NotImplementedError

    def add_image(self, tag, img_tensor, global_step=None, walltime=None, dataformats="CHW"):
        """Records one image (float in [0, 1] or uint8), laid out as dataformats (CHW, HWC,
        HW, ...), as PNG."""
        self._get_file_writer().add_summary(image(tag, img_tensor, dataformats=dataformats),
                                            global_step, walltime)

    def add_images(self, tag, img_tensor, global_step=None, walltime=None,
                   dataformats="NCHW"):
        """Records a batch of images (NCHW, NHWC, ...) as one grid image."""
        self._get_file_writer().add_summary(image(tag, img_tensor, dataformats=dataformats),
                                            global_step, walltime)

    def add_image_with_boxes(self, tag, img_tensor, box_tensor, global_step=None,
                             walltime=None, rescale=1, dataformats="CHW", labels=None):
        """Records an image with boxes (N x 4: xmin, ymin, xmax, ymax) drawn on it, each
        with its label if there is one label per box."""
        if labels is not None:
            if isinstance(labels, str):
                labels = [labels]
            if len(labels) != box_tensor.shape[0]:
                labels = None
        summary = image_boxes(tag, img_tensor, box_tensor, rescale=rescale,
                              dataformats=dataformats, labels=labels)
        self._get_file_writer().add_summary(summary, global_step, walltime)

    def add_figure(self, tag, figure, global_step=None, close=True, walltime=None):
        """Records a matplotlib figure (or a list of them, as a grid) as an image; needs
        matplotlib (ImportError without it)."""
        fmt = "NCHW" if isinstance(figure, list) else "CHW"
        self.add_image(tag, figure_to_image(figure, close), global_step, walltime,
                       dataformats=fmt)

    def add_video(self, tag, vid_tensor, global_step=None, fps=4, walltime=None):
        """Records videos (N, T, C, H, W) as one GIF; needs moviepy (without it: a message
        printed and an empty record, as PyTorch writes)."""
        self._get_file_writer().add_summary(video(tag, vid_tensor, fps), global_step,
                                            walltime)

    def add_audio(self, tag, snd_tensor, global_step=None, sample_rate=44100, walltime=None):
        """Records one channel of sound (values in [-1, 1]) as WAV."""
        self._get_file_writer().add_summary(audio(tag, snd_tensor, sample_rate=sample_rate),
                                            global_step, walltime)

    def add_mesh(self, tag, vertices, colors=None, faces=None, config_dict=None,
                 global_step=None, walltime=None):
        """Records a mesh or point cloud: vertices (B, N, 3), optional colors and faces,
        a three.js config_dict."""
        self._get_file_writer().add_summary(mesh(tag, vertices, colors, faces, config_dict),
                                            global_step, walltime)

    def add_graph(self, model, input_to_model=None, verbose=False, use_strict_trace=True):
        """Records the graph of model's forward on input_to_model (a tensor or a tuple of
        arguments), as llgrad's tracer records it, for the GRAPHS tab; verbose prints the
        IR graph. use_strict_trace is accepted for PyTorch's signature (llgrad's tracer
        records lists and dicts of tensors either way)."""
        self._get_file_writer().add_graph(graph(model, input_to_model, verbose,
                                                use_strict_trace))

    @staticmethod
    def _encode(rawstr):
        return rawstr.replace("%", "%25").replace("/", "%2f").replace("\\", "%5c")

    def add_embedding(self, mat, metadata=None, label_img=None, global_step=None,
                      tag="default", metadata_header=None):
        """Records vectors (N x D) for the PROJECTOR tab, with optional labels (metadata,
        several columns with metadata_header) and images (label_img, N x C x H x W), in
        <log_dir>/<global_step, 5 digits>/<tag>/."""
        mat = make_np(mat)
        if global_step is None:
            global_step = 0
        subdir = f"{str(global_step).zfill(5)}/{self._encode(tag)}"
        save_path = os.path.join(self._get_file_writer().get_logdir(), subdir)
        fs = tf.io.gfile
        if fs.exists(save_path):
            if not fs.isdir(save_path):
                raise NotADirectoryError(
                    f"Path: `{save_path}` exists, but is a file. Cannot proceed.")
            print("warning: Embedding dir exists, did you set global_step for "
                  "add_embedding()?")
        else:
            fs.makedirs(save_path)
        if metadata is not None:
            if mat.shape[0] != len(metadata):
                raise AssertionError("#labels should equal with #data points")
            make_tsv(metadata, save_path, metadata_header=metadata_header)
        if label_img is not None:
            if mat.shape[0] != label_img.shape[0]:
                raise AssertionError("#images should equal with #data points")
            make_sprite(label_img, save_path)
        if mat.ndim != 2:
            raise AssertionError(
                "mat should be 2D, where mat.size(0) is the number of data points")
        make_mat(mat, save_path)
        # the config lists every embedding so far: rewritten whole (no appending to files)
        if not hasattr(self, "_projector_config"):
            self._projector_config = ProjectorConfig()
        self._projector_config.embeddings.extend(
            [get_embedding_info(metadata, label_img, subdir, global_step, tag)])
        write_pbtxt(self._get_file_writer().get_logdir(),
                    text_format.MessageToString(self._projector_config))
