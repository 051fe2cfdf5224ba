"""Sweep 19 (C), part 13: DETR's set criterion as the DETR repository writes it: box
conversions through unbind/stack, generalized IoU from broadcast max/min, the Hungarian
matcher under @torch.no_grad() handing the cost matrix (split per image) to SciPy's
linear_sum_assignment, the permutation indices built with full_like and cat, cross-entropy
over queries with a down-weighted no-object class, L1 and GIoU box losses on the matched
pairs (the model compiled, as torch.compile(model), the matcher eager); then inference with a
hand-written NMS loop. Run with PyTorch, with llgrad eagerly
and with llgrad.compile (tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")
scipy_optimize = pytest.importorskip("scipy.optimize")

from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch


def detr_set_criterion(torch, env):
    nn, F = torch.nn, torch.nn.functional
    linear_sum_assignment = scipy_optimize.linear_sum_assignment
    num_classes, num_queries, D = 3, 5, 12

    def box_cxcywh_to_xyxy(x):
        x_c, y_c, w, h = x.unbind(-1)
        b = [(x_c - 0.5 * w), (y_c - 0.5 * h), (x_c + 0.5 * w), (y_c + 0.5 * h)]
        return torch.stack(b, dim=-1)

    def box_area(boxes):
        return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])

    def box_iou(boxes1, boxes2):
        area1, area2 = box_area(boxes1), box_area(boxes2)
        lt = torch.max(boxes1[:, None, :2], boxes2[:, :2])
        rb = torch.min(boxes1[:, None, 2:], boxes2[:, 2:])
        wh = (rb - lt).clamp(min=0)
        inter = wh[:, :, 0] * wh[:, :, 1]
        union = area1[:, None] + area2 - inter
        return inter / union, union

    def generalized_box_iou(boxes1, boxes2):
        assert (boxes1[:, 2:] >= boxes1[:, :2]).all()
        assert (boxes2[:, 2:] >= boxes2[:, :2]).all()
        iou, union = box_iou(boxes1, boxes2)
        lt = torch.min(boxes1[:, None, :2], boxes2[:, :2])
        rb = torch.max(boxes1[:, None, 2:], boxes2[:, 2:])
        wh = (rb - lt).clamp(min=0)
        area = wh[:, :, 0] * wh[:, :, 1]
        return iou - (area - union) / area

    class HungarianMatcher(nn.Module):
        def __init__(self, cost_class=1, cost_bbox=5, cost_giou=2):
            super().__init__()
            self.cost_class, self.cost_bbox, self.cost_giou = cost_class, cost_bbox, cost_giou

        @torch.no_grad()
        def forward(self, outputs, targets):
            bs, num_queries = outputs["pred_logits"].shape[:2]
            out_prob = outputs["pred_logits"].flatten(0, 1).softmax(-1)
            out_bbox = outputs["pred_boxes"].flatten(0, 1)
            tgt_ids = torch.cat([v["labels"] for v in targets])
            tgt_bbox = torch.cat([v["boxes"] for v in targets])
            cost_class = -out_prob[:, tgt_ids]
            cost_bbox = torch.cdist(out_bbox, tgt_bbox, p=1)
            cost_giou = -generalized_box_iou(box_cxcywh_to_xyxy(out_bbox), box_cxcywh_to_xyxy(tgt_bbox))
            C = self.cost_bbox * cost_bbox + self.cost_class * cost_class + self.cost_giou * cost_giou
            C = C.view(bs, num_queries, -1).cpu()
            sizes = [len(v["boxes"]) for v in targets]
            indices = [linear_sum_assignment(c[i]) for i, c in enumerate(C.split(sizes, -1))]
            return [(torch.as_tensor(i, dtype=torch.int64), torch.as_tensor(j, dtype=torch.int64))
                    for i, j in indices]

    class SetCriterion(nn.Module):
        def __init__(self, matcher, eos_coef=0.1):
            super().__init__()
            self.matcher = matcher
            empty_weight = torch.ones(num_classes + 1)
            empty_weight[-1] = eos_coef
            self.register_buffer("empty_weight", empty_weight)

        def _get_src_permutation_idx(self, indices):
            batch_idx = torch.cat([torch.full_like(src, i) for i, (src, _) in enumerate(indices)])
            src_idx = torch.cat([src for (src, _) in indices])
            return batch_idx, src_idx

        def forward(self, outputs, targets):
            indices = self.matcher(outputs, targets)
            num_boxes = max(float(sum(len(t["labels"]) for t in targets)), 1.0)
            idx = self._get_src_permutation_idx(indices)
            src_logits = outputs["pred_logits"]
            target_classes_o = torch.cat([t["labels"][J] for t, (_, J) in zip(targets, indices)])
            target_classes = torch.full(src_logits.shape[:2], num_classes, dtype=torch.int64)
            target_classes[idx] = target_classes_o
            loss_ce = F.cross_entropy(src_logits.transpose(1, 2), target_classes, self.empty_weight)
            src_boxes = outputs["pred_boxes"][idx]
            target_boxes = torch.cat([t["boxes"][i] for t, (_, i) in zip(targets, indices)], dim=0)
            loss_bbox = F.l1_loss(src_boxes, target_boxes, reduction="none").sum() / num_boxes
            loss_giou = 1 - torch.diag(generalized_box_iou(box_cxcywh_to_xyxy(src_boxes),
                                                           box_cxcywh_to_xyxy(target_boxes)))
            return {"loss_ce": loss_ce, "loss_bbox": loss_bbox, "loss_giou": loss_giou.sum() / num_boxes}

    class TinyDETR(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = nn.Sequential(nn.Linear(8, D), nn.ReLU())
            self.query_embed = nn.Embedding(num_queries, D)
            self.class_embed = nn.Linear(D, num_classes + 1)
            self.bbox_embed = nn.Sequential(nn.Linear(D, D), nn.ReLU(), nn.Linear(D, 4))

        def forward(self, x):
            h = self.backbone(x)[:, None, :] + self.query_embed.weight[None]
            return {"pred_logits": self.class_embed(h), "pred_boxes": self.bbox_embed(h).sigmoid()}

    model = env.init(TinyDETR())
    criterion = SetCriterion(HungarianMatcher())
    weight_dict = {"loss_ce": 1, "loss_bbox": 5, "loss_giou": 2}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4)

    # the matcher reads the costs into SciPy, which no trace can hold: the model is
    # compiled (torch.compile(model)), the criterion runs eagerly on its outputs
    compiled_model = env.step(model)

    def train_step(samples, targets):
        outputs = compiled_model(samples)
        loss_dict = criterion(outputs, targets)
        losses = sum(loss_dict[k] * weight_dict[k] for k in loss_dict.keys() if k in weight_dict)
        opt.zero_grad()
        losses.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        opt.step()
        return losses, {k: v.item() for k, v in loss_dict.items()}
    samples = env.randn(2, 8)
    targets = []
    for n in (2, 3):
        c, wh = env.rand(n, 2) * 0.5 + 0.25, env.rand(n, 2) * 0.3 + 0.1
        targets.append({"labels": env.randint(0, num_classes, (n,)), "boxes": torch.cat([c, wh], 1)})
    for i in range(5):
        env.rec(f"step{i}", train_step(samples, targets))
    env.rec("params", dict(model.named_parameters()))

    def nms(boxes, scores, iou_threshold):
        order = scores.argsort(descending=True)
        keep = []
        while order.numel() > 0:
            i = order[0]
            keep.append(i.item())
            if order.numel() == 1:
                break
            iou = box_iou(boxes[i].unsqueeze(0), boxes[order[1:]])[0].squeeze(0)
            order = order[1:][iou <= iou_threshold]
        return torch.tensor(keep, dtype=torch.int64)

    model.eval()
    with torch.no_grad():
        out = model(samples)
        prob = F.softmax(out["pred_logits"], -1)
        scores, labels = prob[..., :-1].max(-1)
        boxes = box_cxcywh_to_xyxy(out["pred_boxes"])
        for b in range(2):
            keep = nms(boxes[b], scores[b], 0.3)
            env.rec(f"kept{b}", (keep, labels[b][keep], scores[b][keep]))


def test_detr():
    run_tutorial(detr_set_criterion)
