"""What ``autograder/engine/runner.py`` overrides in jupyter_client is still there and still used.

The kernel's message budget, a denial-of-service guard, rests on three private parts of jupyter_client:
the channels read every message through ``_recv`` (the runner's counts each frame as it arrives), the
client opens its sockets through ``_create_connected_socket`` (the runner's caps their message size and
queue) and the manager starts the ``_kernel_spec`` it holds (the runner's launches the sandbox). These
tests fail when an installed jupyter_client no longer does so; ``pyproject.toml`` bounds the versions
they passed with (widen the pin only after they pass on the new version).
"""

from __future__ import annotations

import asyncio
import re
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest

zmq = pytest.importorskip("zmq")
pytest.importorskip("jupyter_client")

from jupyter_client.kernelspec import KernelSpec  # noqa: E402
from jupyter_client.manager import AsyncKernelManager  # noqa: E402
from jupyter_client.session import Session  # noqa: E402
from packaging.specifiers import SpecifierSet  # noqa: E402

from autograder.core.limits import Limits  # noqa: E402
from autograder.engine.runner import MAX_MESSAGE_BYTES, QUEUED_MESSAGES, Budget, LimitedKernelClient  # noqa: E402
from autograder.engine.runner import _CountedChannel  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def test_the_manager_starts_the_kernel_spec_the_runner_gives_it_with_the_runners_client(tmp_path):
    manager = AsyncKernelManager(transport="ipc", ip=str(tmp_path / "s"), connection_file=str(tmp_path / "k.json"))
    manager.client_class = "autograder.engine.runner.LimitedKernelClient"
    spec = KernelSpec(argv=["sandbox", "{connection_file}"], display_name="sandboxed Python", language="python",
                      interrupt_mode="signal")
    manager._kernel_spec = spec
    assert manager.kernel_spec is spec
    assert manager.format_kernel_cmd() == ["sandbox", str(tmp_path / "k.json")]
    assert isinstance(manager.client(), LimitedKernelClient)


def test_every_frame_is_charged_as_it_arrives_on_a_socket_the_runner_opened(tmp_path):
    async def exchange() -> tuple[dict, Budget, tuple[int, int]]:
        session = Session(key=b"contract")
        client = LimitedKernelClient(transport="ipc", ip=str(tmp_path / "s"), session=session, shell_port=1)
        kernel = zmq.Context.instance().socket(zmq.ROUTER)
        kernel.bind(client._make_url("shell"))
        try:
            client.start_channels(shell=True, iopub=False, stdin=False, hb=False, control=False)
            channel = client.shell_channel
            assert isinstance(channel, _CountedChannel)
            channel.budget = budget = Budget(Limits())
            client.kernel_info()
            assert kernel.poll(5000), "the client's request did not arrive"
            identity, *_ = kernel.recv_multipart()
            kernel.send_multipart([identity, *session.serialize(session.msg("kernel_info_reply", {"status": "ok"}))])
            reply = await client.get_shell_msg(timeout=5)
            return reply, budget, (channel.socket.getsockopt(zmq.MAXMSGSIZE), channel.socket.getsockopt(zmq.RCVHWM))
        finally:
            client.stop_channels()
            kernel.close(linger=0)

    reply, budget, options = asyncio.run(exchange())
    assert reply["msg_type"] == "kernel_info_reply" and reply["content"] == {"status": "ok"}
    limits = Limits()
    assert budget.messages_left == limits.messages - 1
    assert 0 < limits.message_mb * 1024 * 1024 - budget.bytes_left < 4096
    assert options == (MAX_MESSAGE_BYTES, QUEUED_MESSAGES)


def test_pyproject_pins_jupyter_client_to_the_versions_these_tests_passed_with():
    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    pins = {name: next(re.sub(r"^jupyter_client", "", d) for d in deps if d.startswith("jupyter_client"))
            for name, deps in extras.items() if any(d.startswith("jupyter_client") for d in deps)}
    assert set(pins) >= {"grading", "validate"} and len(set(pins.values())) == 1, pins
    pin = SpecifierSet(next(iter(pins.values())))
    assert "<" in str(pin), f"jupyter_client{pin} has no upper bound: a new release could drop what the runner overrides"
    assert version("jupyter_client") in pin, f"the installed jupyter_client {version('jupyter_client')} is not in {pin}"
