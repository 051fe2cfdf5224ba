"""nn.LSTM/GRU/RNN against torch, with the options tutorials pass: two layers,
bidirectional, batch_first, proj_size, dropout=0, initial states (with and without grad),
no bias, relu, unbatched inputs and cells, PackedSequence inputs (pack_padded_sequence with
enforce_sorted=False, pack_sequence) and pad_packed_sequence(total_length=...): outputs, the
inputs' and parameters' .grad, llgrad eager and llgrad.compile (check_module in
test_adversary_s73_c2.py)."""
import numpy as np
import pytest

pytest.importorskip("torch")
from test_adversary_s73_c2 import check_module  # noqa: E402

pytestmark = pytest.mark.slow       # (a compile a case)

R = np.random.default_rng(731)

S = R.standard_normal((3, 5, 4)).astype(np.float32)
H2 = (R.standard_normal((4, 3, 6)) * 0.5).astype(np.float32)
LENS = np.array([3, 5, 2])


def rnn_state(lib, m, x, h0, c0):
    return m(x, (h0, c0)) if isinstance(m, lib.nn.LSTM) else m(x, h0)


def rnn_packed(lib, m, x, lens, h0, c0):
    rnn = lib.nn.utils.rnn
    p = rnn.pack_padded_sequence(x, lens, batch_first=True, enforce_sorted=False)
    out, hidden = m(p, (h0, c0)) if isinstance(m, lib.nn.LSTM) else m(p, h0)
    y, ls = rnn.pad_packed_sequence(out, batch_first=True, total_length=6)
    return y, ls, hidden, out.data


def rnn_no_state(lib, m, x):
    return m(x.transpose(0, 1)), m(x[0])


RNNS = {
    "lstm_2l_bi_bf_state": (lambda t: t.nn.LSTM(4, 6, num_layers=2, bidirectional=True, batch_first=True), rnn_state,
                            (("grad", S), ("grad", H2), ("grad", H2 * 2))),
    "lstm_proj": (lambda t: t.nn.LSTM(4, 6, num_layers=2, bidirectional=True, batch_first=True, proj_size=3), rnn_state,
                  (("grad", S), ("grad", H2[..., :3].copy()), ("grad", H2))),
    "gru_2l_bi_state": (lambda t: t.nn.GRU(4, 6, num_layers=2, bidirectional=True, batch_first=True, dropout=0.0), rnn_state,
                        (("grad", S), ("grad", H2), H2)),
    "rnn_relu_no_bias": (lambda t: t.nn.RNN(4, 6, num_layers=2, nonlinearity="relu", bias=False), rnn_no_state, (("grad", S),)),
    "lstm_packed": (lambda t: t.nn.LSTM(4, 6, num_layers=2, bidirectional=True, batch_first=True), rnn_packed,
                    (("grad", S), LENS, ("grad", H2), H2)),
    "lstm_proj_packed": (lambda t: t.nn.LSTM(4, 6, num_layers=2, batch_first=True, proj_size=2), rnn_packed,
                         (("grad", S), LENS, ("grad", H2[:2, :, :2].copy()), H2[:2])),
    "gru_packed": (lambda t: t.nn.GRU(4, 6, num_layers=2, bidirectional=True, batch_first=True), rnn_packed,
                   (("grad", S), LENS, ("grad", H2), H2)),
}

def rnn_unbatched(lib, m, x):
    return (m[0](x[0]), m[1](x[0], (lib.zeros(2, 6), lib.ones(2, 6))), m[2](x[0, 0]), m[3](x[0, 0], lib.ones(6)),
            m[4](x[0], lib.zeros(2, 6)))


def packed_sequence_sorted(lib, m, x):
    rnn = lib.nn.utils.rnn
    p = rnn.pack_sequence([x[0], x[1, :3], x[2, :1]])
    out, h = m(p)
    y, ls = rnn.pad_packed_sequence(out, padding_value=-1.0)
    return y, ls, h, p.batch_sizes


def gru_bad_h0(lib, m, x):
    return m(x, lib.zeros(1, 5, 6))


RNNS.update({
    "unbatched_and_cells": (lambda t: t.nn.ModuleList([t.nn.LSTM(4, 6, bidirectional=True), t.nn.LSTM(4, 6, num_layers=2),
                                                       t.nn.LSTMCell(4, 6), t.nn.GRUCell(4, 6), t.nn.RNN(4, 6, num_layers=2)]),
                            rnn_unbatched, (("grad", S),)),
    "gru_pack_sequence": (lambda t: t.nn.GRU(4, 6, bidirectional=True), packed_sequence_sorted, (("grad", S),)),
    "gru_bad_h0_raises": (lambda t: t.nn.GRU(4, 6, num_layers=2), gru_bad_h0, (S,)),
})


@pytest.mark.filterwarnings("ignore:LSTM with projections")
@pytest.mark.parametrize("name", list(RNNS))
def test_recurrent_modules(name):
    build, call, specs = RNNS[name]
    check_module(build, call, *specs)
