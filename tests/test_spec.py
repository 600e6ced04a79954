"""Run spec and pack loading: every bad-input path gives `file: path: what was expected`."""

from __future__ import annotations

from typing import Annotated

import attrs
import pytest

from agentsynth_kernel.errors import SpecError
from agentsynth_kernel.spec import Bounds, ComponentSpec, load_pack, load_run_spec, select_tasks, structure


def errors_of(path, host) -> list[str]:
    with pytest.raises(SpecError) as info:
        load_run_spec(path, host=host)
    return str(info.value).splitlines()


def test_valid_spec_loads_with_defaults_and_overrides(kv_spec, host):
    spec, pack = load_run_spec(kv_spec, host=host, overrides={"trials": 3})
    assert spec.trials == 3 and spec.concurrency == 4 and spec.policy == ComponentSpec("oracle", {})
    assert [t.id for t in pack.tasks] == ["set-b", "del-a"]
    assert pack.tasks[0].tier == "1"  # an int tier is kept as its name
    assert pack.task_environment(pack.tasks[0]) == ComponentSpec("kv", {"initial": {"a": "1"}})
    assert pack.content_hash.startswith("sha256:")


def test_malformed_yaml_names_line_and_column(write, host):
    path = write("spec.yaml", "policy: {type: noop}\ntrials: [1\n")
    (line,) = errors_of(path, host)
    assert line.startswith(f"{path}: line 3, column 1: invalid YAML:")


def test_missing_file(tmp_path, host):
    assert errors_of(tmp_path / "nope.yaml", host) == [f"{tmp_path / 'nope.yaml'}: file not found"]


def test_top_level_must_be_a_mapping(write, host):
    path = write("spec.yaml", "- 1\n")
    assert errors_of(path, host) == [f"{path}: expected a mapping at the top level (a run spec), got a list"]


def test_wrong_types_and_unknown_keys_with_paths(write, host):
    path = write(
        "spec.yaml",
        """
        policy: noop
        trails: 3
        seed: "x"
        concurrency: yes
        budget: {usd: cheap, tokns: 3}
        environment: {type: kv}
        tasks:
          - id: a
            instrution: x
          - 5
        """,
    )
    lines = set(errors_of(path, host))
    assert f"{path}: trails: unknown key (did you mean 'trials'?)" in lines
    assert f"{path}: seed: expected an integer, got str 'x'" in lines
    assert f"{path}: concurrency: expected an integer, got a boolean" in lines
    assert f"{path}: budget.usd: expected a number, got str 'cheap'" in lines
    assert f"{path}: budget.tokns: unknown key (did you mean 'tokens'?)" in lines
    assert f"{path}: tasks[0].instrution: unknown key (did you mean 'instruction'?)" in lines
    assert f"{path}: tasks[0].instruction: missing required key" in lines
    assert f"{path}: tasks[1]: expected a mapping, got int 5" in lines


def test_unknown_type_names_suggest_the_closest(write, host):
    path = write(
        "spec.yaml",
        """
        policy: {type: orcale}
        environment: {type: kv}
        tasks:
          - id: a
            instruction: x
            checkers: [{type: kv_equal, key: a, value: "1"}]
        """,
    )
    lines = errors_of(path, host)
    assert f"{path}: policy.type: unknown policy 'orcale' (did you mean 'oracle'?)" in lines
    assert f"{path}: tasks[0].checkers[0].type: unknown checker 'kv_equal' (did you mean 'kv_equals'?)" in lines


def test_component_parameters_are_checked_against_the_factory(write, host):
    path = write(
        "spec.yaml",
        """
        policy: {type: random, cals: 3}
        environment: {type: kv, intial: {}}
        tasks:
          - id: a
            instruction: x
            checkers: [{type: kv_equals, kye: a}]
        """,
    )
    lines = errors_of(path, host)
    assert f"{path}: policy.cals: unknown key for policy 'random' (did you mean 'calls'?)" in lines
    assert f"{path}: environment.intial: unknown key for environment 'kv' (did you mean 'initial'?)" in lines
    assert f"{path}: tasks[0].checkers[0].kye: unknown key for checker 'kv_equals' (did you mean 'key'?)" in lines
    assert f"{path}: tasks[0].checkers[0].key: missing required key for checker 'kv_equals'" in lines


def test_component_needs_a_type(write, host):
    path = write("spec.yaml", "policy: {model: x}\ntasks: []\nenvironment: {type: kv}\n")
    assert f"{path}: policy: missing required key 'type'" in errors_of(path, host)


def test_pack_semantics_duplicate_ids_bad_split_no_checkers(write, host):
    path = write(
        "spec.yaml",
        """
        policy: noop
        environment: {type: kv}
        tasks:
          - {id: a, instruction: x, checkers: [called_tool]}
          - {id: a, instruction: y, split: dev}
          - {id: "bad id", instruction: z, checkers: [{type: called_tool, tool: set}]}
        only: [b]
        """,
    )
    lines = errors_of(path, host)
    assert f"{path}: tasks[1].id: duplicate task id 'a' (also tasks[0])" in lines
    assert f"{path}: tasks[1].split: expected one of train, test, got 'dev'" in lines
    assert f"{path}: tasks[1].checkers: no checker decides this task (add one to the task or the pack)" in lines
    assert f"{path}: tasks[2].id: 'bad id' is not a valid id (letters, digits, '_', '-', '.')" in lines
    assert f"{path}: tasks[0].checkers[0].tool: missing required key for checker 'called_tool'" in lines
    assert any(line.startswith(f"{path}: only[0]: no task 'b' in pack") for line in lines)


def test_pack_and_tasks_are_exclusive(write, host):
    path = write("spec.yaml", "policy: noop\n")
    assert errors_of(path, host) == [
        f"{path}: pack: give either 'pack:' (a name or path) or inline 'tasks:', not both or neither"
    ]


def test_unknown_pack_name(write, host):
    path = write("spec.yaml", "policy: noop\npack: no-such-pack\n")
    (line,) = errors_of(path, host)  # the spec that names it is the file at fault
    assert line.startswith(f"{path}: pack: no such pack 'no-such-pack': not a file or directory (from {path.parent}),"
                           " nor a registered pack")


def test_pack_directory_loads_by_path_and_selects_split(write, host):
    write("mypack/pack.yaml", """
        description: demo
        environment: {type: kv}
        checkers: [{type: called_tool, tool: set}]
        tasks:
          - {id: t1, instruction: x, split: train}
          - {id: t2, instruction: y}
        """)
    spec_path = write("spec.yaml", "policy: noop\npack: mypack\nsplit: test\n")
    spec, pack = load_run_spec(spec_path, host=host)
    assert pack.id == "mypack" and pack.description == "demo"
    assert [t.id for t in select_tasks(spec, pack)] == ["t2"]
    assert pack.task_checkers(pack.tasks[0])[0].type == "called_tool"


def test_the_loader_fields_are_set_on_a_copy_and_are_not_pack_keys(write, host, tmp_path):
    from agentsynth_kernel.spec import located

    path = write("mypack/pack.yaml", "environment: {type: kv}\ntasks: [{id: t1, instruction: x, checkers: [answer_contains]}]\n")
    pack = load_pack(path.parent, host=host)
    assert (pack.base_dir, pack.source) == (path.parent.resolve(), str(path)) and pack.content_hash.startswith("sha256:")
    moved = located(pack, base_dir=tmp_path / "elsewhere", source="elsewhere/pack.yaml", content_hash="sha256:x")
    assert (moved.base_dir, moved.source, moved.content_hash) == (tmp_path / "elsewhere", "elsewhere/pack.yaml", "sha256:x")
    assert pack.base_dir == path.parent.resolve() and pack.content_hash != "sha256:x"  # the original is unchanged
    assert moved.tasks == pack.tasks and moved.task_environment(moved.tasks[0]).type == "kv"
    write("mypack/pack.yaml", path.read_text() + "base_dir: /etc\ncontent_hash: sha256:forged\n")
    with pytest.raises(SpecError) as info:
        load_pack(path.parent, host=host)
    assert f"{path}: base_dir: unknown key" in str(info.value) and f"{path}: content_hash: unknown key" in str(info.value)


def test_pack_directory_without_pack_yaml(tmp_path, host):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SpecError, match="pack directory has no pack.yaml"):
        load_pack(tmp_path / "empty", host=host)


def test_registered_pack_resolves_by_name(write, host):
    pack_file = write("shipped.yaml", """
        environment: {type: kv}
        tasks: [{id: t, instruction: x, checkers: [{type: kv_equals, key: a, value: null}]}]
        """)

    class Shipper:
        from agentsynth_kernel import hookimpl

        @hookimpl
        def register_packs(self, register):
            register("shipped", pack_file)

    host.add_plugin(Shipper(), "shipper")
    assert load_pack("shipped", host=host).tasks[0].id == "t"


def test_export_entries_need_a_path(write, host, kv_spec):
    class Exporters:
        from agentsynth_kernel import hookimpl

        @hookimpl
        def register_exporters(self, register):
            def make(pretty: bool = False):
                return object()

            register("tiny", make)

    host.add_plugin(Exporters(), "tiny-exporter")
    text = kv_spec.read_text() + "export:\n  - {type: tiny, pretty: true}\n  - {type: tiny, path: a.jsonl, prety: 1}\n"
    lines = errors_of(write("spec.yaml", text), host)
    assert lines == [
        f"{kv_spec}: export[0].path: missing required key (the file or directory to write)",
        f"{kv_spec}: export[1].prety: unknown key for exporter 'tiny' (did you mean 'pretty'?)",
    ]


def test_a_string_is_not_a_list(write, host):
    path = write("spec.yaml", """
        policy: noop
        only: set-b
        environment: {type: kv}
        tasks: "abc"
        """)
    lines = errors_of(path, host)
    assert f"{path}: only: expected a list, got str 'set-b'" in lines
    assert f"{path}: tasks: expected a list, got str 'abc'" in lines


def test_frozen_component_specs_are_structured_once_mutable_ones_every_time(host):
    import attrs

    from agentsynth_kernel import hookimpl
    from agentsynth_kernel.spec import build

    @attrs.frozen
    class Frozen:
        size: int = 1

    @attrs.define
    class Mutable:
        size: int = 1

    seen = []

    class Reg:
        @hookimpl
        def register_environments(self, register):
            register("frozen_env", lambda spec: seen.append(spec) or object(), spec_cls=Frozen)
            register("mutable_env", lambda spec: seen.append(spec) or object(), spec_cls=Mutable)

    host.add_plugin(Reg(), "specs")
    frozen, mutable = ComponentSpec("frozen_env", {"size": 3}), ComponentSpec("mutable_env", {"size": 3})
    for cspec in (frozen, frozen, mutable, mutable):
        build("environment", cspec, host=host)
    assert seen[0] is seen[1] and seen[0] == Frozen(3)
    assert seen[2] is not seen[3] and seen[2] == seen[3] == Mutable(3)
    assert build("environment", ComponentSpec("frozen_env", {"size": 4}), host=host) and seen[-1] == Frozen(4)


def test_frozenness_is_asked_of_the_class_not_tried_on_the_object(host):
    """A spec_cls with only its first field frozen is structured every time (its factory may change
    the others), and deciding so never writes to the object (a setter hook would see the write)."""
    import attrs

    from agentsynth_kernel import hookimpl
    from agentsynth_kernel.spec import build

    writes = []

    @attrs.define
    class PartlyFrozen:
        size: int = attrs.field(default=1, on_setattr=attrs.setters.frozen)
        label: str = attrs.field(default="", on_setattr=lambda _self, attr, value: writes.append(attr.name) or value)

    seen = []

    class Reg:
        @hookimpl
        def register_environments(self, register):
            register("partly_frozen_env", lambda spec: seen.append(spec) or object(), spec_cls=PartlyFrozen)

    host.add_plugin(Reg(), "specs")
    cspec = ComponentSpec("partly_frozen_env", {"size": 2, "label": "x"})
    build("environment", cspec, host=host)
    build("environment", cspec, host=host)
    assert seen[0] is not seen[1] and seen[0] == seen[1] == PartlyFrozen(2, "x")
    assert writes == []


def test_a_generation_spec_needs_no_pack(host, write):
    path = write("gen.yaml", "generate: {type: hk_nothing}\n")
    with pytest.raises(SpecError) as info:
        load_run_spec(path, host=host)
    assert "generate.type: unknown generator 'hk_nothing'" in str(info.value)
    assert "pack:" not in str(info.value)


def test_a_run_spec_still_needs_a_pack_or_tasks(host, write):
    path = write("run.yaml", "policy: noop\n")
    with pytest.raises(SpecError) as info:
        load_run_spec(path, host=host)
    assert "pack: give either 'pack:'" in str(info.value)


@attrs.define
class Limits:
    cpu_seconds: Annotated[float, Bounds(above=0)] = 10.0
    workers: Annotated[int, Bounds(low=1, high=64)] = 1


def test_bounds_on_a_spec_cls_field_are_enforced_like_on_factory_parameters():
    assert structure({"cpu_seconds": 2, "workers": 8}, Limits, source="s").workers == 8
    with pytest.raises(SpecError) as info:
        structure({"cpu_seconds": 0, "workers": 65}, Limits, source="pack.yaml", prefix="environment")
    text = str(info.value)
    assert "environment.cpu_seconds: expected > 0, got 0" in text
    assert "environment.workers: expected >= 1 and <= 64, got 65" in text
