"""The three Summaries of the hparams plugin (torch's summary.hparams): the experiment
(which hyperparameters and metrics there are), the session's start (the values) and end."""
import logging

from google.protobuf import struct_pb2
from tensorboard.compat.proto.summary_pb2 import Summary, SummaryMetadata
from tensorboard.plugins.hparams.api_pb2 import DataType, Experiment, HParamInfo, \
    MetricInfo, MetricName, Status
from tensorboard.plugins.hparams.metadata import EXPERIMENT_TAG, PLUGIN_DATA_VERSION, \
    PLUGIN_NAME, SESSION_END_INFO_TAG, SESSION_START_INFO_TAG
from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData, SessionEndInfo, \
    SessionStartInfo

from ...runtime.tensor import Tensor
from ._convert_np import make_np

logger = logging.getLogger(__name__)


def _check_dicts(hparam_dict, metric_dict, domains):
    for what, d in (("hparam_dict", hparam_dict), ("metric_dict", metric_dict)):
        if not isinstance(d, dict):
            logger.warning(f"parameter: {what} should be a dictionary, nothing logged.")
            raise TypeError(f"parameter: {what} should be a dictionary, nothing logged.")
    if not isinstance(domains, dict):
        raise TypeError(
            "parameter: hparam_domain_discrete should be a dictionary, nothing logged.")
    for k, values in domains.items():
        if (k not in hparam_dict or not isinstance(values, list)
                or not all(isinstance(d, type(hparam_dict[k])) for d in values)):
            raise TypeError(f"parameter: hparam_domain_discrete[{k}] should be a list of "
                            f"same type as hparam_dict[{k}].")


def _summary(tag, **content):
    data = HParamsPluginData(version=PLUGIN_DATA_VERSION, **content).SerializeToString()
    meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name=PLUGIN_NAME,
                                                                  content=data))
    return Summary(value=[Summary.Value(tag=tag, metadata=meta)])


def hparams(hparam_dict=None, metric_dict=None, hparam_domain_discrete=None):
    """(experiment, session start, session end) Summaries of the hparams plugin.

    Values may be numbers (bools included: Python's bool is an int, and PyTorch stores
    them as numbers), strings, one-element tensors, or None (left out)."""
    domains = hparam_domain_discrete or {}
    _check_dicts(hparam_dict, metric_dict, domains)
    infos = []
    start = SessionStartInfo()
    for k, v in hparam_dict.items():
        if v is None:
            continue
        if isinstance(v, (int, float)):
            field, dtype = "number_value", "DATA_TYPE_FLOAT64"
        elif isinstance(v, str):
            field, dtype = "string_value", "DATA_TYPE_STRING"
        elif isinstance(v, Tensor):
            setattr(start.hparams[k], "number_value", make_np(v)[0])
            infos.append(HParamInfo(name=k, type=DataType.Value("DATA_TYPE_FLOAT64")))
            continue
        else:
            raise ValueError("value should be one of int, float, str, bool, or torch.Tensor")
        setattr(start.hparams[k], field, v)
        domain = None
        if k in domains:
            domain = struct_pb2.ListValue(
                values=[struct_pb2.Value(**{field: d}) for d in domains[k]])
        infos.append(HParamInfo(name=k, type=DataType.Value(dtype), domain_discrete=domain))
    experiment = Experiment(hparam_infos=infos,
                            metric_infos=[MetricInfo(name=MetricName(tag=k))
                                          for k in metric_dict])
    end = SessionEndInfo(status=Status.Value("STATUS_SUCCESS"))
    return (_summary(EXPERIMENT_TAG, experiment=experiment),
            _summary(SESSION_START_INFO_TAG, session_start_info=start),
            _summary(SESSION_END_INFO_TAG, session_end_info=end))
