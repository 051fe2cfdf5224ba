"""A small layered drawing of dot.py's Model as SVG, for machines without Graphviz.

Each cluster (forward, backward) is laid out on its own: nodes ranked by their longest
path from the inputs, ordered within a rank by a few barycentre sweeps (fewer crossings),
packed left to right; clusters side by side. Edges are curves from the bottom of a node to
the top of the next; a fused group is a dashed box around its nodes; saved values are
dotted curves from the forward to the backward. Not Graphviz, but readable for the graphs
of a small model."""


def escape(text):
    """XML text: &, < and > escaped (xml.sax.saxutils.escape, without its import cost)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

CHAR_W, LINE_H, PAD, GAP_X, GAP_Y, CLUSTER_GAP = 6.6, 12.5, 8, 18, 42, 70

_HUES = ("#3b6fb6", "#b5482f", "#2f8f5b", "#8a4fb0", "#b07d1a", "#2b8c9e", "#b0407a")
_FILL = {"input": "#dbe9f6", "saved": "#fff2b3", "op": "#ffffff", "view": "#ffffff",
         "const": "#ffffff", "return": "#e6e6e6"}


class _Box:
    __slots__ = ("id", "lines", "kind", "w", "h", "x", "y", "rank")

    def __init__(self, nid, lines, kind):
        self.id, self.lines, self.kind = nid, lines, kind
        self.w = max(len(s) for s in lines) * CHAR_W + 2 * PAD
        self.h = len(lines) * LINE_H + 2 * PAD - 4
        self.x = self.y = 0.0
        self.rank = 0


def _layout(cluster):
    boxes = {nid: _Box(nid, lines, kind) for nid, lines, kind in cluster.nodes}
    preds = {nid: [] for nid in boxes}
    succs = {nid: [] for nid in boxes}
    for src, dst, label in cluster.edges:
        if src in boxes and dst in boxes and label != "written back":
            preds[dst].append(src)
            succs[src].append(dst)
    order = [nid for nid, _, _ in cluster.nodes]
    for nid in order:                       # (node order is topological)
        b = boxes[nid]
        b.rank = max((boxes[p].rank + 1 for p in preds[nid]), default=0)
    # cheap nodes (views, constants) and nodes without operands sit just above their
    # first consumer, not at the top
    for nid in reversed(order):
        b = boxes[nid]
        if b.kind in ("input", "saved", "return") and not preds[nid]:
            continue
        if (b.kind in ("view", "const") or not preds[nid]) and succs[nid]:
            b.rank = max(b.rank, min(boxes[s].rank for s in succs[nid]) - 1)
    group_of = {}
    for k, (label, members) in enumerate(cluster.groups):
        for m in members:
            group_of[m] = k
    ranks = {}
    for nid in order:
        ranks.setdefault(boxes[nid].rank, []).append(nid)
    pos = {}
    for r, ids in ranks.items():
        for k, nid in enumerate(ids):
            pos[nid] = k
    for sweep in range(6):
        down = sweep % 2 == 0
        for r in sorted(ranks, reverse=not down):
            ids = ranks[r]
            nbr = preds if down else succs

            def bary(nid):
                ns = nbr[nid]
                return sum(pos[n] for n in ns) / len(ns) if ns else pos[nid]
            if sweep >= 2 and group_of:     # members of a group in one column
                centre = {}
                for n in pos:
                    if n in group_of:
                        centre.setdefault(group_of[n], []).append(pos[n])
                centre = {g: sum(v) / len(v) for g, v in centre.items()}
                ids.sort(key=lambda n: (centre[group_of[n]] if n in group_of else bary(n),
                                        bary(n)))
            else:
                ids.sort(key=bary)
            for k, nid in enumerate(ids):
                pos[nid] = k
    # x: packed left to right, then nodes pulled towards their neighbours' centres (the
    # order within a rank kept, no overlaps), a few sweeps down and up
    for ids in ranks.values():
        x = 0.0
        for nid in ids:
            boxes[nid].x = x
            x += boxes[nid].w + GAP_X
    centre = lambda n: boxes[n].x + boxes[n].w / 2      # noqa: E731
    for sweep in range(8):
        down = sweep % 2 == 0
        for r in sorted(ranks, reverse=not down):
            ids = ranks[r]
            want = []
            for nid in ids:
                ns = (preds if down else succs)[nid] or preds[nid] + succs[nid]
                want.append(sum(centre(n) for n in ns) / len(ns) - boxes[nid].w / 2
                            if ns else boxes[nid].x)
            right = None
            for nid, x in zip(ids, want):               # left to right: no overlap
                b = boxes[nid]
                b.x = x if right is None else max(x, right)
                right = b.x + b.w + GAP_X
            left = None
            for nid, x in zip(reversed(ids), reversed(want)):   # and back: as near as allowed
                b = boxes[nid]
                if left is not None and b.x + b.w + GAP_X > left:
                    b.x = left - GAP_X - b.w
                left = b.x
    lo = min((b.x for b in boxes.values()), default=0.0)
    for b in boxes.values():
        b.x -= lo
    width = max((b.x + b.w for b in boxes.values()), default=0.0)
    y = 0.0
    for r in sorted(ranks):
        ids = ranks[r]
        h = max(boxes[n].h for n in ids)
        for nid in ids:
            b = boxes[nid]
            b.y = y + (h - b.h) / 2
        y += h + GAP_Y
    return boxes, width, y - GAP_Y


def draw(model):
    laid = [(c, *_layout(c)) for c in model.clusters]
    parts, x0 = [], 20.0
    all_boxes = {}
    top = 46.0
    height = 0.0
    for c, boxes, w, h in laid:
        w = max(w, len(c.label) * 7.2)
        for b in boxes.values():
            b.x += x0 + 16
            b.y += top + 16
            all_boxes[b.id] = b
        parts.append(f'<rect x="{x0:.1f}" y="{top - 22:.1f}" width="{w + 32:.1f}" '
                     f'height="{h + 54:.1f}" rx="8" fill="none" stroke="#333" />')
        parts.append(f'<text x="{x0 + 10:.1f}" y="{top - 6:.1f}" font-family="Helvetica" '
                     f'font-size="12" font-weight="bold">{escape(c.label)}</text>')
        for k, (label, members) in enumerate(c.groups):
            # a group: a tinted halo around each member (one hue per group: a bounding box
            # would take in other nodes), its label above the first member
            ms = [boxes[m] for m in members if m in boxes]
            if not ms:
                continue
            hue = _HUES[k % len(_HUES)]
            for b in ms:
                parts.append(f'<rect x="{b.x - 5:.1f}" y="{b.y - 13:.1f}" width="{b.w + 10:.1f}" '
                             f'height="{b.h + 18:.1f}" rx="6" fill="{hue}" fill-opacity="0.12" '
                             f'stroke="{hue}" stroke-dasharray="4,3" />')
            first = min(ms, key=lambda b: (b.y, b.x))
            parts.append(f'<text x="{first.x - 2:.1f}" y="{first.y - 4:.1f}" '
                         f'font-family="Helvetica" font-size="8.5" fill="{hue}">'
                         f'{escape(label)}</text>')
        for src, dst, label in c.edges:
            a, b = boxes.get(src), boxes.get(dst)
            if a is None or b is None:
                continue
            parts.append(_edge(a, b, label))
        height = max(height, top + h + 40)
        x0 += w + 32 + CLUSTER_GAP
    for src, dst, label in model.cross:
        a, b = all_boxes.get(src), all_boxes.get(dst)
        if a is None or b is None:
            continue
        x1, y1 = a.x + a.w, a.y + a.h / 2
        x2, y2 = b.x, b.y + b.h / 2
        mx = (x1 + x2) / 2
        parts.append(f'<path d="M{x1:.1f},{y1:.1f} C{mx:.1f},{y1:.1f} {mx:.1f},{y2:.1f} '
                     f'{x2:.1f},{y2:.1f}" fill="none" stroke="#b08800" stroke-dasharray="2,3" '
                     f'marker-end="url(#saved)" />')
    for b in all_boxes.values():
        parts.append(_box(b))
    width = x0 - CLUSTER_GAP + 20
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
            f'viewBox="0 0 {width:.0f} {height:.0f}">\n'
            '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
            'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#555" /></marker>'
            '<marker id="saved" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
            'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#b08800" />'
            '</marker></defs>\n'
            f'<rect width="100%" height="100%" fill="white" />\n'
            f'<text x="20" y="16" font-family="Helvetica" font-size="13">'
            f'{escape(model.name)}</text>\n')
    return head + "\n".join(parts) + "\n</svg>\n"


def _edge(a, b, label):
    x1, y1 = a.x + a.w / 2, a.y + a.h
    x2, y2 = b.x + b.w / 2, b.y
    if label == "written back" or y2 <= y1:
        x1, y1 = a.x + a.w, a.y + a.h / 2
        x2, y2 = b.x + b.w, b.y + b.h / 2
        bend = max(x1, x2) + 40
        path = f"M{x1:.1f},{y1:.1f} C{bend:.1f},{y1:.1f} {bend:.1f},{y2:.1f} {x2:.1f},{y2:.1f}"
    else:
        dy = (y2 - y1) / 2
        path = f"M{x1:.1f},{y1:.1f} C{x1:.1f},{y1 + dy:.1f} {x2:.1f},{y2 - dy:.1f} " \
               f"{x2:.1f},{y2:.1f}"
    out = f'<path d="{path}" fill="none" stroke="#777" marker-end="url(#arrow)" />'
    if label:
        out += (f'<text x="{(x1 + x2) / 2 + 3:.1f}" y="{(y1 + y2) / 2:.1f}" '
                f'font-family="Helvetica" font-size="8" fill="#555">{escape(label)}</text>')
    return out


def _box(b):
    dash = ' stroke-dasharray="4,2"' if b.kind == "view" else \
        ' stroke-dasharray="1,2"' if b.kind == "const" else ""
    rx = b.h / 2 if b.kind == "input" else 5
    out = [f'<rect x="{b.x:.1f}" y="{b.y:.1f}" width="{b.w:.1f}" height="{b.h:.1f}" rx="{rx:.1f}" '
           f'fill="{_FILL[b.kind]}" stroke="#444"{dash} />']
    for k, line in enumerate(b.lines):
        color = "#222" if k == 0 else "#555"
        out.append(f'<text x="{b.x + b.w / 2:.1f}" y="{b.y + PAD + 6 + k * LINE_H:.1f}" '
                   f'text-anchor="middle" font-family="Courier, monospace" font-size="10" '
                   f'fill="{color}">{escape(line)}</text>')
    return "".join(out)
