"""TCP proxy that delays every connection before relaying it to sshd (SlowBanner fault).

Run as a script inside a host namespace:
    python slowproxy.py LISTEN_ADDR PORT UPSTREAM_ADDR UPSTREAM_PORT DELAY_S
The connection is accepted at once (so the client sees a completed TCP handshake)
but sshd is only dialled after DELAY_S, which delays the server's SSH banner by
the same amount.  Prints "ready" once listening.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        pass


async def _handle(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    upstream: tuple[str, int],
    delay_s: float,
) -> None:
    up_writer: asyncio.StreamWriter | None = None
    try:
        await asyncio.sleep(delay_s)  # the link's one-way delay, on a real socket
        up_reader, up_writer = await asyncio.open_connection(*upstream)
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
    except (ConnectionError, OSError):
        pass
    finally:
        for w in (writer, up_writer):
            if w is not None:
                w.close()
                with contextlib.suppress(ConnectionError, OSError):
                    await w.wait_closed()


async def _main(listen: str, port: int, upstream: tuple[str, int], delay_s: float) -> None:
    server = await asyncio.start_server(lambda r, w: _handle(r, w, upstream, delay_s), listen, port, reuse_address=True)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str]) -> int:
    if len(argv) != 5:
        print(__doc__, file=sys.stderr)
        return 2
    listen, port, up_addr, up_port, delay = argv
    asyncio.run(_main(listen, int(port), (up_addr, int(up_port)), float(delay)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
