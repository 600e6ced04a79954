"""``agentsynth python build-image|status``: the container backend's image, built offline from
Debian's mirror (no registry), and whether each backend works here."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import click

from .container import DEFAULT_IMAGE, RUNTIMES, ContainerError, ContainerSpec, find_runtime

EXCLUDES = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/info/*", "/usr/share/locale/*")


def mmdebstrap_argv(suite: str, target: str, mirror: str, include: list[str]) -> list[str]:
    """A minimal Debian (Essential packages + python3 and ``include``), no docs / man / locales."""
    argv = ["mmdebstrap", "--variant=essential", f"--include={','.join(['python3', *include])}"]
    for pattern in EXCLUDES:
        argv.append(f"--dpkgopt=path-exclude={pattern}")
    if target == "-":
        argv.append("--format=tar")
    return [*argv, suite, target, mirror]


@click.group()
def python() -> None:
    """The python world's sandboxes (bubblewrap, or a Podman / Docker container)."""


@python.command("build-image")
@click.option("--runtime", type=click.Choice(RUNTIMES), default="auto", show_default=True,
              help="Where to import the image (auto: podman, then docker).")
@click.option("--tag", default=DEFAULT_IMAGE, show_default=True, help="The image name (container.image).")
@click.option("--rootfs", type=click.Path(path_type=Path, file_okay=False),
              help="Write a root file system directory here instead of importing an image (container.rootfs, podman).")
@click.option("--suite", default="bookworm", show_default=True, help="The Debian release.")
@click.option("--mirror", default="http://deb.debian.org/debian", show_default=True, help="The Debian mirror.")
@click.option("--include", "include", default="", help="More Debian packages, comma-separated (e.g. python3-numpy).")
@click.option("--dry-run", is_flag=True, help="Print the commands, run nothing.")
def build_image(runtime: str, tag: str, rootfs: Path | None, suite: str, mirror: str, include: str,
                dry_run: bool) -> None:
    """Build the container backend's image from Debian's mirror with mmdebstrap (no registry, no
    Dockerfile): Debian's Essential packages and python3, ~150 MB, ~30 s on a fast mirror."""
    extra = [p.strip() for p in include.split(",") if p.strip()]
    if rootfs is not None:
        if rootfs.exists() and any(rootfs.iterdir()):
            raise click.ClickException(f"--rootfs {rootfs}: the directory exists and is not empty")
        argv = mmdebstrap_argv(suite, str(rootfs), mirror, extra)
        if dry_run:
            click.echo(shlex.join(argv))
            return
        _need_mmdebstrap()
        code = subprocess.run(argv).returncode
        if code != 0:
            raise click.ClickException(f"mmdebstrap failed (exit {code}); its output is above")
        click.echo(f"wrote {rootfs}; use it with: isolation: container, container: {{rootfs: {rootfs}}}")
        return
    try:
        kind, path = find_runtime(runtime)
    except ContainerError as exc:
        raise click.ClickException(str(exc)) from None
    argv = mmdebstrap_argv(suite, "-", mirror, extra)
    importing = [path, "import", "-", tag]
    if dry_run:
        click.echo(f"{shlex.join(argv)} | {shlex.join(importing)}")
        return
    _need_mmdebstrap()
    build = subprocess.Popen(argv, stdout=subprocess.PIPE)
    imported = subprocess.run(importing, stdin=build.stdout, capture_output=True, text=True)
    assert build.stdout is not None
    build.stdout.close()
    code = build.wait()
    if code != 0:
        raise click.ClickException(f"mmdebstrap failed (exit {code}); its output is above")
    if imported.returncode != 0:
        raise click.ClickException(f"{kind} import failed: {imported.stderr.strip()[-800:]}")
    click.echo(f"imported {tag} into {kind} ({imported.stdout.strip()[:80]})")
    click.echo(f"check it: agentsynth python status --runtime {kind} --image {tag}")


def _need_mmdebstrap() -> None:
    if shutil.which("mmdebstrap") is None:
        raise click.ClickException("mmdebstrap is not installed (Debian: apt-get install mmdebstrap)")


@python.command("status")
@click.option("--runtime", type=click.Choice(RUNTIMES), default="auto", show_default=True)
@click.option("--image", default=DEFAULT_IMAGE, show_default=True)
@click.option("--rootfs", type=click.Path(path_type=Path, file_okay=False))
def status(runtime: str, image: str, rootfs: Path | None) -> None:
    """Whether each sandbox backend works here (a real sandbox is started for each); exit 1 when
    neither does."""
    from . import container, sandbox

    problem = sandbox.probe()
    click.echo(f"bwrap: {'works' if not problem else 'unavailable: ' + problem}")
    try:
        rt = container.probe(ContainerSpec(runtime=runtime, image=image, rootfs=str(rootfs) if rootfs else None))
    except ContainerError as exc:
        click.echo(f"container: unavailable: {exc}")
        if problem:
            raise SystemExit(1) from None
        return
    click.echo(f"container: works ({container.describe(rt)}, Python {rt.version})")
