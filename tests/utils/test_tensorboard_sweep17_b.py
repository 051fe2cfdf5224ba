"""llgrad.utils.tensorboard against torch.utils.tensorboard: the same calls on both writers,
into two directories, read back as Event protocol buffers (and through TensorBoard's
EventAccumulator) must hold the same records, wall times aside."""
import importlib
import os
import re
import socket
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tensorboard")
torch_tb = pytest.importorskip("torch.utils.tensorboard")

import llgrad  # noqa: E402
import llgrad.nn as lnn  # noqa: E402
from llgrad.utils import tensorboard as llgrad_tb  # noqa: E402
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa
from tensorboard.backend.event_processing.event_file_loader import \
    LegacyEventFileLoader  # noqa: E402

pytestmark = pytest.mark.torch


def _numbers_as_numbers(name):
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def _events(root):
    """{run directory relative to root: [Event without its wall time]}, files in name
    order."""
    runs = {}
    for dirpath, _, files in os.walk(root):
        found = []
        # (in the order written: the names' numbers compared as numbers, the writer's file
        # counter going from 9 to 10 within a second included)
        for name in sorted((f for f in files if "tfevents" in f), key=_numbers_as_numbers):
            for event in LegacyEventFileLoader(os.path.join(dirpath, name)).Load():
                event.ClearField("wall_time")
                found.append(event)
        if found:
            runs[os.path.relpath(dirpath, root)] = found
    return runs


def _both(tmp_path, calls):
    """Runs calls(writer, module) with torch's writer and llgrad's; their records."""
    out = []
    for lib, tb in ((torch, torch_tb), (llgrad, llgrad_tb)):
        root = tmp_path / lib.__name__
        with tb.SummaryWriter(str(root)) as w:
            calls(w, lib)
        out.append(_events(root))
    return out


def _assert_same(expected, actual):
    assert sorted(expected) == sorted(actual)
    for run in expected:
        assert len(expected[run]) == len(actual[run]), run
        for e, a in zip(expected[run], actual[run]):
            assert e == a, f"{run}:\n{e}\n!=\n{a}"


rng = np.random.default_rng(17)
VALUES = rng.normal(size=(40,)).astype(np.float32)
IMG_CHW = rng.random((3, 8, 6)).astype(np.float32)
IMG_HWC_U8 = (rng.random((5, 7, 3)) * 255).astype(np.uint8)
BATCH = rng.random((5, 1, 4, 3)).astype(np.float64)
SOUND = np.sin(np.linspace(0, 20, 300)).astype(np.float32)[None]
LABELS = rng.integers(0, 2, size=50)
PREDS = rng.random(50).astype(np.float32)


def _scalars_and_tensors(w, lib):
    t = lib.from_numpy
    w.add_scalar("loss", 0.5, 0)
    w.add_scalar("loss", t(np.array(0.25, np.float32)), 1)
    w.add_scalar("loss", np.float64(0.125), np.int64(2))
    w.add_scalar("acc", t(np.array([3], np.int64)), 3, new_style=True)
    w.add_scalar("acc", 1.0 / 3, 4, new_style=True, double_precision=True)
    w.add_scalar("fixed_time", 7, 5, walltime=123.0)
    w.add_scalar("grad", t(np.array([1.5], np.float32)).requires_grad_(), 5)
    w.add_scalars("run/main", {"a": 1.5, "b": t(np.array(2.5, np.float32))}, 6)
    for dtype in (np.float32, np.float64, np.float16, np.int64, np.int32, np.int16,
                  np.int8, np.uint8, np.bool_):
        w.add_tensor(f"tensor_{np.dtype(dtype).name}", t((VALUES[:6] * 3).astype(dtype)
                                                         .reshape(2, 3)), 7)
    w.add_tensor("requires_grad", t(VALUES[:6].reshape(2, 3).copy()).requires_grad_(), 7)
    w.add_tensor("transposed", t(VALUES[:6].reshape(2, 3).copy()).t(), 7)
    w.add_text("note", "llgrad **writes** this", 8)
    w.add_text("note", "second", 9)


def _histograms(w, lib):
    t = lib.from_numpy
    w.add_histogram("h", t(VALUES), 0)
    w.add_histogram("h", VALUES * 100, 1)
    w.add_histogram("h_auto", t(VALUES.astype(np.float64)), 2, bins="auto")
    w.add_histogram("h_max", t(VALUES), 3, bins=50, max_bins=7)
    w.add_histogram("h_int", t(np.arange(10)), 4, bins="fd")
    w.add_histogram("h_bool", t(VALUES > 0), 4)
    counts, limits = np.histogram(VALUES, bins=5)
    w.add_histogram_raw("raw", VALUES.min(), VALUES.max(), VALUES.size, VALUES.sum(),
                        float(VALUES @ VALUES), limits[1:].tolist(), counts.tolist(), 5)


def _images_and_media(w, lib):
    t = lib.from_numpy
    w.add_image("chw", t(IMG_CHW), 0)
    w.add_image("hwc_u8", IMG_HWC_U8, 1, dataformats="HWC")
    w.add_image("hw", t(IMG_CHW[0]), 2, dataformats="HW")
    w.add_image("whc", t(IMG_CHW.transpose(2, 1, 0).copy()), 3, dataformats="WHC")
    w.add_image("u8_transposed", t((IMG_CHW * 255).astype(np.uint8)).transpose(1, 2), 3)
    w.add_images("batch", t(BATCH), 4)
    w.add_images("batch_nhwc", BATCH.transpose(0, 2, 3, 1), 5, dataformats="NHWC")
    boxes = t(np.array([[1, 1, 5, 6], [0, 2, 3, 4]], np.float32))
    w.add_image_with_boxes("boxes", t(IMG_CHW), boxes, 6, labels=["cat", "dog"])
    w.add_image_with_boxes("boxes_nolabel", t(IMG_CHW), boxes, 7, rescale=2)
    w.add_image_with_boxes("one_box", t(IMG_CHW), boxes[:1], 7, labels="solo")
    w.add_audio("sound", t(SOUND), 8, sample_rate=8000)
    w.add_audio("loud", t(SOUND * 3), 9)
    w.add_video("video", t(rng.random((3, 2, 3, 4, 4)).astype(np.float32)), 10)
    verts = t(np.array([[[1, 1, 1], [-1, -1, 1], [1, -1, -1], [-1, 1, -1]]], np.float32))
    colors = t(np.array([[[255, 0, 0], [0, 255, 0], [0, 0, 255], [255, 0, 255]]], np.int32))
    faces = t(np.array([[[0, 2, 3], [0, 3, 1], [0, 1, 2], [1, 3, 2]]], np.int32))
    w.add_mesh("mesh", verts, colors=colors, faces=faces, global_step=11,
               config_dict={"camera": {"cls": "PerspectiveCamera", "fov": 75}})
    w.add_mesh("points", verts, global_step=12)


def _curves_layouts_hparams(w, lib):
    t = lib.from_numpy
    w.add_pr_curve("pr", t(LABELS), t(PREDS), 0)
    w.add_pr_curve("pr_np", LABELS, PREDS, 1, num_thresholds=300)
    w.add_pr_curve("pr_w", LABELS, PREDS, 2, num_thresholds=10, weights=0.5)
    w.add_pr_curve_raw("pr_raw", *[np.arange(5.0) + i for i in range(6)], global_step=3,
                       num_thresholds=5)
    w.add_custom_scalars({"cat": {"lines": ["Multiline", ["loss", "acc"]],
                                  "band": ["Margin", ["m", "lo", "hi"]]}})
    w.add_custom_scalars_multilinechart(["a", "b"], category="c2", title="t2")
    w.add_custom_scalars_marginchart(["x", "y", "z"])
    w.add_hparams({"lr": 0.1, "bsize": 8, "opt": "adam", "flag": True, "skip": None,
                   "wd": t(np.array([0.5], np.float32))},
                  {"hparam/acc": 0.9, "hparam/loss": t(np.array(0.1, np.float32))},
                  hparam_domain_discrete={"opt": ["adam", "sgd"], "bsize": [8, 16]},
                  run_name="hp_run", global_step=4)


@pytest.mark.parametrize("calls", [_scalars_and_tensors, _histograms, _images_and_media,
                                   _curves_layouts_hparams])
def test_records_match_torch(tmp_path, calls, capsys):
    expected, actual = _both(tmp_path, calls)
    assert expected            # (the runs hold records at all)
    _assert_same(expected, actual)
    printed = capsys.readouterr().out.splitlines()
    # what each writer printed (video without moviepy, loud audio), torch's first
    assert printed[:len(printed) // 2] == printed[len(printed) // 2:]


def test_event_accumulator_reads_llgrad_records(tmp_path):
    with llgrad_tb.SummaryWriter(str(tmp_path)) as w:
        for step in range(3):
            w.add_scalar("loss", llgrad.tensor(1.0 / (step + 1)), step)
        w.add_histogram("weights", llgrad.from_numpy(VALUES), 0)
        w.add_image("img", llgrad.from_numpy(IMG_CHW), 0)
        w.add_text("words", "hello", 0)
    acc = EventAccumulator(str(tmp_path), size_guidance={"tensors": 0})
    acc.Reload()
    assert [(s.step, s.value) for s in acc.Scalars("loss")] == \
        [(0, 1.0), (1, 0.5), (2, np.float32(1 / 3).item())]
    hist = acc.Histograms("weights")[0].histogram_value
    assert hist.num == VALUES.size and hist.min == pytest.approx(VALUES.min())
    img = acc.Images("img")[0]
    assert (img.height, img.width) == (8, 6)
    assert acc.Tensors("words/text_summary")[0].tensor_proto.string_val == [b"hello"]


def test_embedding_files_match_torch(tmp_path):
    mat = rng.normal(size=(9, 4)).astype(np.float32)
    imgs = rng.random((9, 3, 5, 5)).astype(np.float32)
    meta = [[f"w{i}", i % 3] for i in range(9)]
    for lib, tb in ((torch, torch_tb), (llgrad, llgrad_tb)):
        with tb.SummaryWriter(str(tmp_path / lib.__name__)) as w:
            w.add_embedding(lib.from_numpy(mat), metadata=list(range(9)),
                            label_img=lib.from_numpy(imgs), tag="a/b%c")
            w.add_embedding(mat, metadata=meta, metadata_header=["word", "k"], global_step=3)
    files = {}
    for lib in (torch, llgrad):
        root = tmp_path / lib.__name__
        files[lib.__name__] = {str(p.relative_to(root)): p.read_bytes()
                               for p in sorted(root.rglob("*"))
                               if p.is_file() and "tfevents" not in p.name}
    assert "00000/a%2fb%25c/sprite.png" in files["llgrad"]
    assert files["torch"] == files["llgrad"]


def test_purge_step_reopen_and_closing(tmp_path):
    def calls(w, lib):
        w.add_scalar("x", 1.0, 5)
        w.close()
        w.close()                       # a second close does nothing
        w.add_scalar("x", 2.0, 6)       # opens a new event file
        w.flush()
    out = []
    for lib, tb in ((torch, torch_tb), (llgrad, llgrad_tb)):
        root = tmp_path / lib.__name__
        w = tb.SummaryWriter(str(root), purge_step=4, filename_suffix=".sfx")
        assert w.get_logdir() == str(root)
        calls(w, lib)
        w.close()
        assert all(name.endswith(".sfx") for name in os.listdir(root))
        out.append(_events(root))
    _assert_same(*out)
    assert [e.step for e in out[1]["."] if e.HasField("session_log")] == [4]


def test_default_log_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    pattern = (r"runs/[A-Z][a-z]{2}\d{2}_\d{2}-\d{2}-\d{2}_" + re.escape(socket.gethostname())
               + "_lr0.1$")
    dirs = []
    for tb in (torch_tb, llgrad_tb):
        w = tb.SummaryWriter(comment="_lr0.1")
        w.close()
        assert re.match(pattern, w.get_logdir()), w.get_logdir()
        assert os.path.isdir(w.get_logdir())
        dirs.append(w.get_logdir())
    # a log_dir given: the comment is not used
    w = llgrad_tb.SummaryWriter(log_dir="mine", comment="ignored")
    w.close()
    assert w.get_logdir() == "mine" and os.path.isdir("mine")


def _import_error(monkeypatch, name, tensorboard_entry):
    """The exception importing module `name` raises with sys.modules["tensorboard"] set to
    tensorboard_entry (the module and its submodules imported afresh)."""
    with monkeypatch.context() as m:
        for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
            m.delitem(sys.modules, key)
        m.setitem(sys.modules, "tensorboard", tensorboard_entry)
        with pytest.raises(ImportError) as info:
            importlib.import_module(name)
    return info.value


def test_import_error_without_tensorboard(monkeypatch):
    import tensorboard
    for entry in (None, type(sys)("tensorboard")):      # missing; without a __version__
        expected = _import_error(monkeypatch, "torch.utils.tensorboard", entry)
        actual = _import_error(monkeypatch, "llgrad.utils.tensorboard", entry)
        assert type(actual) is type(expected) and str(actual) == str(expected)
    monkeypatch.setattr(tensorboard, "__version__", "1.14.2")
    actual = _import_error(monkeypatch, "llgrad.utils.tensorboard", tensorboard)
    assert str(actual) == "TensorBoard logging requires TensorBoard version 1.15 or above"
    # (the real modules are back)
    assert importlib.import_module("llgrad.utils.tensorboard").SummaryWriter is \
        llgrad_tb.SummaryWriter


class _TorchNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 3)
        self.seq = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Linear(3, 2))

    def forward(self, x):
        return self.seq(self.fc1(x)) * 2


class _LlgradNet(lnn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = lnn.Linear(4, 3)
        self.seq = lnn.Sequential(lnn.ReLU(), lnn.Linear(3, 2))
        self.drop = lnn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.seq(self.fc1(x))) * 2


def _graph_of(root):
    acc = EventAccumulator(str(root))
    acc.Reload()
    return acc.Graph(), acc.Tags()


def test_add_graph_scopes_and_shapes_as_torch(tmp_path, capsys):
    x = np.ones((5, 4), np.float32)
    with torch_tb.SummaryWriter(str(tmp_path / "torch")) as w:
        w.add_graph(_TorchNet(), torch.from_numpy(x))
    net = _LlgradNet()
    with llgrad_tb.SummaryWriter(str(tmp_path / "llgrad")) as w:
        w.add_graph(net, llgrad.from_numpy(x), verbose=True)
    assert "graph _LlgradNet" in capsys.readouterr().out
    assert net.training                 # traced in eval mode, put back
    (tg, t_tags), (lg, l_tags) = _graph_of(tmp_path / "torch"), _graph_of(tmp_path / "llgrad")
    assert t_tags["graph"] and l_tags["graph"]
    assert t_tags["run_metadata"] == l_tags["run_metadata"] == ["step1"]

    def shapes(node):
        return [[d.size for d in s.dim] for s in node.attr["_output_shapes"].list.shape]

    def scopes(g, root):
        return {n.name.rsplit("/", 1)[0].replace(root, "Net", 1) for n in g.node
                if n.op.startswith("aten::") or n.op in ("addmm", "relu", "mul", "t")}
    t_nodes = {n.name: n for n in tg.node}
    l_nodes = {n.name: n for n in lg.node}
    assert shapes(l_nodes["input/x"]) == shapes(t_nodes["input/x"]) == [[5, 4]]
    assert l_nodes["input/x"].op == t_nodes["input/x"].op == "IO Node"
    assert shapes(l_nodes["output/output.1"]) == shapes(t_nodes["output/output.1"])
    assert scopes(lg, "_LlgradNet") == scopes(tg, "_TorchNet")
    assert l_nodes["_LlgradNet/Linear[fc1]/weight"].op == "Parameter"
    # every input names a node of the graph (operand or node:output)
    names = set(l_nodes)
    assert all(i.split(":")[0] in names for n in lg.node for i in n.input)


def test_add_graph_tuple_input_and_errors(tmp_path, capsys):
    class Two(lnn.Module):
        def forward(self, a, b):
            return a @ b, (a + 1).max(1)

    with llgrad_tb.SummaryWriter(str(tmp_path)) as w:
        w.add_graph(Two(), (llgrad.ones(2, 3), llgrad.ones(3, 4)))
        nodes = {n.name: n for n in _graph_def_now(w)}
        assert {"input/a", "input/b", "output/output.1", "output/output.3"} <= set(nodes)
        for lib, tb in ((torch, torch_tb), (llgrad, llgrad_tb)):
            with tb.SummaryWriter(str(tmp_path / lib.__name__)) as tw:
                with pytest.raises(AttributeError):     # not a module: no .training
                    tw.add_graph(lambda v: v * 2, lib.ones(2))
                linear = (torch.nn if lib is torch else lnn).Linear(3, 2)
                with pytest.raises(RuntimeError, match="example_kwarg_inputs should be a dict"):
                    tw.add_graph(linear)                # no example input
                tw.add_graph(linear, [lib.ones(4, 3)])  # a list: its items are the arguments
    printed = capsys.readouterr().out
    assert printed.count("Error occurs, No graph saved") == 2


def _graph_def_now(w):
    w.flush()
    graph, _ = _graph_of(w.get_logdir())
    return graph.node


def test_errors_as_torch(tmp_path):
    cases = [
        lambda w, lib: w.add_scalar("x", lib.ones(2)),
        lambda w, lib: w.add_scalar("x", [1.0]),
        lambda w, lib: w.add_histogram("h", lib.ones(0)),
        lambda w, lib: w.add_histogram_raw("h", 0, 1, 1, 1, 1, [1.0, 2.0], [1]),
        lambda w, lib: w.add_hparams([("lr", 1)], {}),
        lambda w, lib: w.add_hparams({"lr": [1]}, {}),
        lambda w, lib: w.add_hparams({"lr": 1}, {}, hparam_domain_discrete={"lr": ["a"]}),
        lambda w, lib: w.add_image("img", lib.ones(3, 4), dataformats="CHW"),
        lambda w, lib: w.add_image("img", lib.ones(3, 4, 4), dataformats="CCW"),
        lambda w, lib: w.add_audio("a", lib.ones(2, 3) * 0.5),
        lambda w, lib: w.add_custom_scalars_marginchart(["a", "b"]),
        lambda w, lib: w.add_embedding(lib.ones(3, 2), metadata=["a"]),
        lambda w, lib: w.add_tensor("t", np.ones(2)),
        lambda w, lib: w.add_figure("fig", object()),
    ]
    for i, case in enumerate(cases):
        raised = []
        for lib, tb in ((torch, torch_tb), (llgrad, llgrad_tb)):
            with tb.SummaryWriter(str(tmp_path / f"{lib.__name__}{i}")) as w:
                with pytest.raises(Exception) as info:
                    case(w, lib)
                raised.append((type(info.value), " ".join(str(info.value).split())))
        assert raised[0] == raised[1], (i, raised)


def test_add_figure_as_torch(tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def figure():
        fig = plt.figure(figsize=(2, 1.5), dpi=40)
        plt.plot([0, 1, 2], [1, 0, 2])
        return fig

    def calls(w, lib):
        w.add_figure("one", figure(), 0)
        w.add_figure("list", [figure(), figure()], 1, close=False)
    expected, actual = _both(tmp_path, calls)
    _assert_same(expected, actual)


def test_add_video_without_moviepy_editor(tmp_path, monkeypatch, capsys):
    # moviepy 2 has no moviepy.editor: PyTorch prints why and writes the tag alone
    monkeypatch.setitem(sys.modules, "moviepy", type(sys)("moviepy"))
    video = rng.random((1, 2, 3, 4, 4)).astype(np.float32)
    expected, actual = _both(tmp_path, lambda w, lib: w.add_video("v", lib.from_numpy(video)))
    _assert_same(expected, actual)
    assert capsys.readouterr().out.count("can't import moviepy.editor") == 2
