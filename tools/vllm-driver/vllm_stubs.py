"""Import vLLM's scheduler-side Python code from an unzipped wheel without torch or a GPU.

`VLLM_SRC` names the directory the wheel was unzipped into (it holds `vllm/`). The `vllm`
package is registered without running its `__init__` (which pulls in torch, platforms and
env overrides); modules that need torch, a platform or the model executor are replaced by
`MagicMock` modules, and so is any third-party module that is not installed. Nothing of
vLLM is copied: the driver imports it from `VLLM_SRC` at run time.
"""
import os, sys, types, importlib.abc, importlib.machinery
from unittest import mock
VLLM = os.path.join(os.environ.get("VLLM_SRC", "/tmp/vllm-0.28.0"), "vllm")
class _Stub(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, prefixes=None): self.prefixes = prefixes
    def find_spec(self, name, path, target=None):
        if self.prefixes is None:
            if name.split(".")[0] in ("vllm",) or name.split(".")[0] in sys.stdlib_module_names or name.startswith("_"):
                return None
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        if any(name == p or name.startswith(p + ".") for p in self.prefixes):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None
    def create_module(self, spec):
        m = mock.MagicMock(name=spec.name)
        m.__path__ = []; m.__spec__ = spec; m.__name__ = spec.name
        return m
    def exec_module(self, module): pass
sys.meta_path.insert(0, _Stub(("torch", "triton", "vllm._C", "vllm._custom_ops", "transformers", "vllm.platforms", "vllm.forward_context", "vllm.v1.worker", "vllm.multimodal", "vllm.utils.torch_utils", "vllm.sampling_params", "vllm.pooling_params", "vllm.lora", "vllm.config", "vllm.distributed.parallel_state", "vllm.model_executor", "vllm.attention", "vllm.v1.attention", "vllm.tokenizers", "vllm.transformers_utils")))
sys.meta_path.append(_Stub())
v = types.ModuleType("vllm"); v.__path__ = [VLLM]; sys.modules["vllm"] = v
