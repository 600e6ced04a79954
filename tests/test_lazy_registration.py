"""A factory and spec class registered as "module:attribute" are imported on first use, not when
the plugin loads; a bad reference is an error naming the plugin, raised where it is used."""

from __future__ import annotations

import sys
import textwrap

import pytest

from agentsynth_kernel import PluginError, hookimpl
from agentsynth_kernel.plugins import PluginHost


@pytest.fixture
def component_module(tmp_path, monkeypatch):
    (tmp_path / "lazy_components_mod.py").write_text(textwrap.dedent("""
        import attrs

        @attrs.frozen
        class EchoSpec:
            text: str = "hi"

        class Echo:
            def __init__(self, spec):
                self.spec = spec
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "lazy_components_mod"
    sys.modules.pop("lazy_components_mod", None)


class LazyPlugin:
    @hookimpl
    def register_environments(self, register):
        register("echo", "lazy_components_mod:Echo", spec_cls="lazy_components_mod:EchoSpec")
        register("missing", "lazy_components_mod:Nothing")


def test_a_string_reference_is_imported_on_first_use(component_module):
    host = PluginHost()
    info = host.add_plugin(LazyPlugin(), "lazy")
    assert info.errors == [] and info.registered == {"environment": ["echo", "missing"]}
    assert component_module not in sys.modules  # registering imported nothing
    reg = host.get("environment", "echo")
    assert reg.factory.__name__ == "Echo" and reg.spec_cls.__name__ == "EchoSpec"
    assert component_module in sys.modules


def test_a_bad_reference_fails_where_it_is_used_naming_the_plugin(component_module):
    host = PluginHost()
    host.add_plugin(LazyPlugin(), "lazy")
    with pytest.raises(PluginError, match=r"plugin 'lazy': environment 'missing': cannot import"):
        _ = host.get("environment", "missing").factory


def test_a_string_that_is_no_reference_is_still_refused():
    class Bad:
        @hookimpl
        def register_environments(self, register):
            register("bad", "not a reference")

    info = PluginHost().add_plugin(Bad(), "bad")
    assert any("factory is not callable" in e for e in info.errors)
