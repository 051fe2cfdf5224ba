"""SummaryWriter and FileWriter (torch.utils.tensorboard.writer): records as TensorBoard
event files, written through tensorboard's EventFileWriter (a queue flushed every
flush_secs, or when max_queue records wait, and on flush / close). The add_* methods of
images, media, graphs and embeddings are in _writer_media.py."""
import os
import socket
import time
from datetime import datetime

from tensorboard.compat.proto import event_pb2
from tensorboard.compat.proto.event_pb2 import Event, SessionLog
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from ._writer_media import MediaMethods
from .summary import custom_scalars, histogram, histogram_raw, hparams, pr_curve, \
    pr_curve_raw, scalar, tensor_proto, text
from ._convert_np import make_np

__all__ = ["FileWriter", "SummaryWriter"]


class FileWriter:
    """Writes Event protocol buffers to one event file in log_dir (made on construction)."""

    def __init__(self, log_dir, max_queue=10, flush_secs=120, filename_suffix=""):
        self.event_writer = EventFileWriter(str(log_dir), max_queue, flush_secs,
                                            filename_suffix)

    def get_logdir(self):
        """The directory of the event file."""
        return self.event_writer.get_logdir()

    def add_event(self, event, step=None, walltime=None):
        """Writes event, stamped with walltime (default: now) and step (if given)."""
        event.wall_time = time.time() if walltime is None else walltime
        if step is not None:
            event.step = int(step)      # (a NumPy or tensor step as a Python int)
        self.event_writer.add_event(event)

    def add_summary(self, summary, global_step=None, walltime=None):
        """Writes a Summary protocol buffer as an Event."""
        self.add_event(event_pb2.Event(summary=summary), global_step, walltime)

    def add_graph(self, graph_profile, walltime=None):
        """Writes a (GraphDef, RunMetadata) pair: the graph, then its run metadata."""
        graph_def, run_metadata = graph_profile
        self.add_event(event_pb2.Event(graph_def=graph_def.SerializeToString()), None,
                       walltime)
        tagged = event_pb2.TaggedRunMetadata(tag="step1",
                                             run_metadata=run_metadata.SerializeToString())
        self.add_event(event_pb2.Event(tagged_run_metadata=tagged), None, walltime)

    def add_onnx_graph(self, graph, walltime=None):
        """Writes a GraphDef."""
        self.add_event(event_pb2.Event(graph_def=graph.SerializeToString()), None, walltime)

    def flush(self):
        """Writes the queued events to disk."""
        self.event_writer.flush()

    def close(self):
        """Flushes and closes the event file."""
        self.event_writer.close()

    def reopen(self):
        """After close(): starts a new event file in the same directory."""
        self.event_writer.reopen()


def default_log_dir(comment=""):
    """runs/<Mon><DD>_<HH>-<MM>-<SS>_<hostname><comment>, PyTorch's default."""
    stamp = datetime.now().strftime("%b%d_%H-%M-%S")
    return os.path.join("runs", stamp + "_" + socket.gethostname() + comment)


class SummaryWriter(MediaMethods):
    """torch.utils.tensorboard.SummaryWriter: writes scalars, histograms, images, text,
    graphs, embeddings, ... as TensorBoard event files in log_dir (default:
    runs/DATE_HOST<comment>). purge_step: a restarted run's first step (TensorBoard hides
    the earlier run's events from that step on). A context manager that closes itself."""

    def __init__(self, log_dir=None, comment="", purge_step=None, max_queue=10,
                 flush_secs=120, filename_suffix=""):
        if not log_dir:
            log_dir = default_log_dir(comment)
        self.log_dir = log_dir
        self.purge_step = purge_step
        self.max_queue = max_queue
        self.flush_secs = flush_secs
        self.filename_suffix = filename_suffix
        self.file_writer = self.all_writers = None
        self._get_file_writer()
        # TensorFlow's default histogram buckets: +-1e-12 growing by 10% up to 1e20, and 0
        edges = []
        v = 1e-12
        while v < 1e20:
            edges.append(v)
            v *= 1.1
        self.default_bins = [-e for e in reversed(edges)] + [0] + edges

    def _get_file_writer(self):
        """The FileWriter of log_dir, made again after close()."""
        if self.all_writers is None or self.file_writer is None:
            self.file_writer = FileWriter(self.log_dir, self.max_queue, self.flush_secs,
                                          self.filename_suffix)
            self.all_writers = {self.file_writer.get_logdir(): self.file_writer}
            if self.purge_step is not None:
                step = self.purge_step
                self.file_writer.add_event(Event(step=step, file_version="brain.Event:2"))
                self.file_writer.add_event(
                    Event(step=step, session_log=SessionLog(status=SessionLog.START)))
                self.purge_step = None
        return self.file_writer

    def get_logdir(self):
        """The directory event files are written to."""
        return self.log_dir

    def add_hparams(self, hparam_dict, metric_dict, hparam_domain_discrete=None,
                    run_name=None, global_step=None):
        """Records a run's hyperparameters and metrics for the HPARAMS tab, in the
        subdirectory run_name (default: the current time) of the log dir."""
        if type(hparam_dict) is not dict or type(metric_dict) is not dict:
            raise TypeError("hparam_dict and metric_dict should be dictionary.")
        exp, ssi, sei = hparams(hparam_dict, metric_dict, hparam_domain_discrete)
        if not run_name:
            run_name = str(time.time())
        logdir = os.path.join(self._get_file_writer().get_logdir(), run_name)
        with SummaryWriter(log_dir=logdir) as w_hp:
            for summary in (exp, ssi, sei):
                w_hp.file_writer.add_summary(summary, global_step)
            for k, v in metric_dict.items():
                w_hp.add_scalar(k, v, global_step)

    def add_scalar(self, tag, scalar_value, global_step=None, walltime=None,
                   new_style=False, double_precision=False):
        """Records one number (a Python number, a one-element tensor or array)."""
        summary = scalar(tag, scalar_value, new_style=new_style,
                         double_precision=double_precision)
        self._get_file_writer().add_summary(summary, global_step, walltime)

    def add_scalars(self, main_tag, tag_scalar_dict, global_step=None, walltime=None):
        """Records several numbers in one chart: each in its own run directory
        <log_dir>/<main_tag>_<tag>, under the tag main_tag."""
        walltime = time.time() if walltime is None else walltime
        fw_logdir = self._get_file_writer().get_logdir()
        for tag, scalar_value in tag_scalar_dict.items():
            fw_tag = fw_logdir + "/" + main_tag.replace("/", "_") + "_" + tag
            if self.all_writers is None:
                raise AssertionError("self.all_writers is None")
            fw = self.all_writers.get(fw_tag)
            if fw is None:
                fw = self.all_writers[fw_tag] = FileWriter(
                    fw_tag, self.max_queue, self.flush_secs, self.filename_suffix)
            fw.add_summary(scalar(main_tag, scalar_value), global_step, walltime)

    def add_tensor(self, tag, tensor, global_step=None, walltime=None):
        """Records a whole tensor (an llgrad tensor)."""
        self._get_file_writer().add_summary(tensor_proto(tag, tensor), global_step, walltime)

    def add_histogram(self, tag, values, global_step=None, bins="tensorflow", walltime=None,
                      max_bins=None):
        """Records the histogram of values; bins: "tensorflow" (TensorFlow's exponential
        buckets) or anything np.histogram takes."""
        if isinstance(bins, str) and bins == "tensorflow":
            bins = self.default_bins
        self._get_file_writer().add_summary(histogram(tag, values, bins, max_bins=max_bins),
                                            global_step, walltime)

    def add_histogram_raw(self, tag, min, max, num, sum, sum_squares, bucket_limits,
                          bucket_counts, global_step=None, walltime=None):
        """Records a histogram given by its statistics and buckets (right edges, counts)."""
        if len(bucket_limits) != len(bucket_counts):
            raise ValueError("len(bucket_limits) != len(bucket_counts), see the document.")
        summary = histogram_raw(tag, min, max, num, sum, sum_squares, bucket_limits,
                                bucket_counts)
        self._get_file_writer().add_summary(summary, global_step, walltime)

    def add_text(self, tag, text_string, global_step=None, walltime=None):
        """Records a string (markdown in TensorBoard's TEXT tab)."""
        self._get_file_writer().add_summary(text(tag, text_string), global_step, walltime)

    def add_pr_curve(self, tag, labels, predictions, global_step=None, num_thresholds=127,
                     weights=None, walltime=None):
        """Records the precision-recall curve of binary labels against predictions."""
        labels, predictions = make_np(labels), make_np(predictions)
        summary = pr_curve(tag, labels, predictions, num_thresholds, weights)
        self._get_file_writer().add_summary(summary, global_step, walltime)

    def add_pr_curve_raw(self, tag, true_positive_counts, false_positive_counts,
                         true_negative_counts, false_negative_counts, precision, recall,
                         global_step=None, num_thresholds=127, weights=None, walltime=None):
        """Records a precision-recall curve given by its counts and rates."""
        summary = pr_curve_raw(tag, true_positive_counts, false_positive_counts,
                               true_negative_counts, false_negative_counts, precision,
                               recall, num_thresholds, weights)
        self._get_file_writer().add_summary(summary, global_step, walltime)

    def add_custom_scalars_multilinechart(self, tags, category="default", title="untitled"):
        """A custom-scalars chart of several scalar tags as lines."""
        layout = {category: {title: ["Multiline", tags]}}
        self._get_file_writer().add_summary(custom_scalars(layout))

    def add_custom_scalars_marginchart(self, tags, category="default", title="untitled"):
        """A custom-scalars chart of 3 tags: a value between a lower and an upper one."""
        if len(tags) != 3:
            raise AssertionError(f"Expected 3 tags, got {len(tags)}.")
        layout = {category: {title: ["Margin", tags]}}
        self._get_file_writer().add_summary(custom_scalars(layout))

    def add_custom_scalars(self, layout):
        """The custom-scalars layout: {category: {chart title: [kind, tags]}}, kind
        "Multiline" or "Margin"."""
        self._get_file_writer().add_summary(custom_scalars(layout))

    def flush(self):
        """Writes every pending record to disk."""
        if self.all_writers is None:
            return
        for writer in self.all_writers.values():
            writer.flush()

    def close(self):
        """Flushes and closes the event files (a second close does nothing; a later add_*
        opens a new event file)."""
        if self.all_writers is None:
            return
        for writer in self.all_writers.values():
            writer.flush()
            writer.close()
        self.file_writer = self.all_writers = None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        self.close()
