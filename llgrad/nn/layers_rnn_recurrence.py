"""The recurrence of nn.RNN, nn.LSTM and nn.GRU (RNNRecurrence, a base of RNNBase:
layers_rnn.py): each layer and direction's input projection and time loop, or, eagerly, an
LSTM layer and direction as one op (lstm_layer), with dropout between layers."""
from ..runtime import dispatch, trace_state
from ..runtime.creation import zeros
from ..runtime.functions import cat, stack
from . import functional as F
from .layers_rnn_cell import gru_step, lstm_step, rnn_step, step_slots
from .layers_rnn_packed import masked, packed_dropout, step_masks


class RNNRecurrence:
    """RNNBase's time loop over a batched input (its methods read RNNBase's attributes:
    mode, num_layers, bidirectional, proj_size, hidden_size, batch_first, dropout)."""

    def _weights(self, layer, direction):
        sfx = "_reverse" if direction else ""
        get = lambda n: getattr(self, f"{n}_l{layer}{sfx}", None)  # noqa: E731
        return (get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh"),
                get("weight_hr"))

    def _run(self, input, h0, c0, lengths=None, packed=None):
        """(output, [h_n per layer and direction], [c_n ...]) for a batched input; h0 / c0
        are (layers * directions, B, size) or None (zeros); lengths (a packed input, which
        comes time-major): each sequence's number of steps; packed: that input."""
        num_directions = 2 if self.bidirectional else 1
        time_major = not self.batch_first or lengths is not None
        batch = input.size(1) if time_major else input.size(0)
        real_hidden = self.proj_size if self.proj_size > 0 else self.hidden_size
        h_init = h0.unbind(0) if h0 is not None else None
        c_init = c0.unbind(0) if c0 is not None else None
        x = input
        if not time_major:
            # time-major, as PyTorch's CPU path: the projection's rows come out grouped by
            # step, so each step's slice is contiguous and the steps' gradients, stacked,
            # reach the projection's backward without a transposing copy
            x, time_major = input.transpose(0, 1).contiguous(), True
        masks = None if lengths is None else step_masks(lengths, input.size(0), input.device)
        whole = self._whole_layers(x, lengths)
        h_n, c_n = [], []
        for layer in range(self.num_layers):
            outs = []
            for d in range(num_directions):
                idx = layer * num_directions + d
                w_ih, w_hh, b_ih, b_hh, w_hr = self._weights(layer, d)
                if whole:           # one op for the layer and direction (ops_rnn_layer.py)
                    h0_, c0_ = ((s[idx] if s is not None else zeros(
                        batch, self.hidden_size, dtype=input.dtype, device=input.device))
                        for s in (h_init, c_init))
                    y, h, c, _, _ = x._op("lstm_layer", w_ih, w_hh, b_ih, b_hh, h0_, c0_,
                                          reverse=d == 1)
                    outs.append(y)
                    h_n.append(h)
                    c_n.append(c)
                    continue
                gx, b_step = self._project(x, w_ih, b_ih, b_hh)
                w_hh_t = w_hh.t().contiguous()
                w_hr_t = w_hr.t().contiguous() if w_hr is not None else None
                steps = gx.unbind(0)
                h = h_init[idx] if h_init is not None else zeros(
                    batch, real_hidden, dtype=input.dtype, device=input.device)
                c = None
                if self.mode == "LSTM":
                    c = c_init[idx] if c_init is not None else zeros(
                        batch, self.hidden_size, dtype=input.dtype, device=input.device)
                ys, h, c = self._scan(steps, h, c, w_hh_t, b_step, w_hr_t, d == 1, masks)
                outs.append(stack(ys))
                h_n.append(h)
                c_n.append(c)
            x, time_major = (cat(outs, 2) if len(outs) > 1 else outs[0]), True
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True) if packed is None else \
                    packed_dropout(x, packed, self.dropout)
        if self.batch_first and lengths is None:
            # PyTorch's RNN and GRU transpose their fresh output in place (TransposeBackward1,
            # not a view); its LSTM returns a transposed view
            x = x.transpose(0, 1) if self.mode == "LSTM" else x.transpose_(0, 1)
        return x, h_n, c_n

    def _whole_layers(self, x, lengths):
        """Whether each layer and direction runs as one op (lstm_layer, PyTorch's
        mkldnn_rnn_layer): an LSTM without projections (torch runs those step by step too)
        on a plain time-major input, eagerly. Traced (compile unrolls the per-step ops into
        its graph) or vmapped, packed, or of no steps, the loop below runs instead."""
        return self.mode == "LSTM" and not self.proj_size and lengths is None and \
            x.size(0) > 0 and trace_state.state.tracer is None and dispatch.batching is None

    def _scan(self, steps, h, c, w_hh_t, b_step, w_hr_t, reverse, masks=None):
        """The time loop of one layer and direction (unrolled when traced): ([h_t in time
        order], last h, last c); masks[t] (packed inputs): the sequences that have step t
        (the others keep h and c)."""
        ys = step_slots(steps)
        for t in (range(len(steps) - 1, -1, -1) if reverse else range(len(steps))):
            m = None if masks is None else masks[t]
            if self.mode == "LSTM":
                h_new, c_new = lstm_step(steps[t], h, c, w_hh_t, b_step, w_hr_t)
                h, c = masked(m, h_new, h), masked(m, c_new, c)
            elif self.mode == "GRU":
                h = masked(m, gru_step(steps[t], h, w_hh_t, b_step), h)
            else:
                h = masked(m, rnn_step(steps[t], h, w_hh_t, b_step,
                                       "tanh" if self.mode == "RNN_TANH" else "relu"), h)
            ys[t] = h
        return ys, h, c

    def _project(self, x, w_ih, b_ih, b_hh):
        """(the input's projection for every step, the bias left for the step): b_hh is
        folded into the projection except in the GRU, whose n gate needs it apart."""
        if b_hh is not None and self.mode != "GRU":
            return F.linear(x, w_ih, b_ih + b_hh), None
        return F.linear(x, w_ih, b_ih), b_hh
