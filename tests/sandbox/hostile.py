"""Hostile model code used by the isolation tests (pool, ``fasteval tool run`` and a real sweep).

Each snippet attacks one guarantee; an innocent call made after it must get exactly its own answer.
"""

from __future__ import annotations

FAKE_KEY = "sk-fake-hostprocess-0123456789"

THREAD_KEEPS_WRITING = """
import threading, sys, os, time
def spam():
    while True:
        try:
            print('LEAKED-FROM-THREAD')
            open('/sandbox/work/leak.txt', 'a').write('x')
        except Exception:
            pass
        for fd in range(3, 64):
            try:
                os.write(fd, b'LEAKED-FROM-THREAD')
            except OSError:
                pass
        time.sleep(0.001)
for _ in range(4):
    threading.Thread(target=spam, daemon=True).start()
print('threads started')
"""

SESSION_THREAD_WRITES_FILES = """
import threading, time
def spam():
    while True:
        for path in ('/sandbox/work/leak.txt', 'mine.txt'):
            try:
                open(path, 'a').write('x')
            except OSError:
                pass
        time.sleep(0.001)
threading.Thread(target=spam, daemon=True).start()
"""

FORGE_REPLY_FRAMES = """
import sys, os, json, struct, gc
def frame(h):
    body = json.dumps({**h, 'blobs': []}).encode()
    return struct.pack('>I', len(body)) + body
forged = frame({'status': 'ok', 'stdout': 'FORGED', 'stderr': '', 'error': None, 'outputs': [], 'nonce': 'x'})
fds = set(range(0, 256))
f = sys._getframe()
while f is not None:  # every fd-looking local of every frame up the stack
    fds |= {v for v in f.f_locals.values() if isinstance(v, int) and 0 <= v < 1024}
    f = f.f_back
for obj in gc.get_objects():
    if type(obj).__name__ in ('Zygote', '_Child'):
        fds |= {v for v in vars(obj).values() if isinstance(v, int)} if hasattr(obj, '__dict__') else set()
written = []
for fd in sorted(fds):
    for _ in range(3):
        try:
            os.write(fd, forged)
            written.append(fd)
        except OSError:
            break
print('wrote to', written)
"""

PATCH_THE_RUNNER = """
import builtins, json, sandbox._executor as ex, sandbox._zygote as zy
def spy(self, req, blobs):
    open('/sandbox/work/stolen.txt', 'a').write(json.dumps(req))
    return {'status': 'ok', 'stdout': 'PATCHED', 'stderr': '', 'error': None, 'outputs': []}, []
ex.CallRunner.run = spy
zy.CallRunner.run = spy
builtins.print = lambda *a, **k: None
json.dumps = lambda *a, **k: '{}'
import sys
sys.stdout.write('patched\\n')
"""

READ_HOST_CMDLINES = """
import os
seen = []
for pid in os.listdir('/proc'):
    if pid.isdigit():
        try:
            seen.append(open(f'/proc/{pid}/cmdline', 'rb').read().replace(b'\\0', b' ').decode(errors='replace'))
        except OSError:
            pass
print(len(seen), 'processes visible')
print('\\n'.join(seen))
"""

HUGE_EXCEPTION = 'raise ValueError("E" * 50_000_000)'

SYSV_SHARED_MEMORY = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
print('shmget', libc.shmget(0x5eed, 4096, 0o1666))
"""

# Searches every anonymous mapping of its own process for a string (given in PARTS, joined only
# at run time, so the code's own text never holds it) with memmem: no copy of memory is made, so
# the one expected hit is the needle itself.
SCAN_OWN_MEMORY = """
import ctypes
libc = ctypes.CDLL(None)
libc.memmem.restype = ctypes.c_void_p
libc.memmem.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
# The needle is assembled piece by piece in one C buffer: a joined bytes object (and its copies)
# would leave freed, not yet overwritten, copies of the needle on the heap of this very call.
size = sum(len(p) for p in PARTS) + len(PARTS) - 1
buf = ctypes.create_string_buffer(size)
at = 0
for i, p in enumerate(PARTS):
    piece = p.encode() if i == len(PARTS) - 1 else p.encode() + b'-'
    ctypes.memmove(ctypes.addressof(buf) + at, piece, len(piece))
    at += len(piece)
needle = ctypes.cast(buf, ctypes.c_char_p)
hits = 0
for line in open('/proc/self/maps').read().splitlines():
    f = line.split()
    if 'r' not in f[1] or (len(f) > 5 and f[5] not in ('[heap]', '[stack]')):
        continue
    lo, hi = (int(x, 16) for x in f[0].split('-'))
    while lo < hi:
        found = libc.memmem(lo, hi - lo, needle, size)
        if not found:
            break
        hits += 1
        lo = found + 1
print(hits)
"""


def innocent(k: int) -> str:
    return f"print('innocent-{k}', sum(range({k})))"


def innocent_stdout(k: int) -> str:
    return f"innocent-{k} {sum(range(k))}\n"


HOSTILE = {
    "thread": THREAD_KEEPS_WRITING,
    "forge": FORGE_REPLY_FRAMES,
    "patch": PATCH_THE_RUNNER,
    "proc": READ_HOST_CMDLINES,
    "huge": HUGE_EXCEPTION,
}

LITTER_THE_FOLDER = """
import json, os, time
open('secret.txt', 'w').write('SECRET-OF-AN-EARLIER-CALL')
os.makedirs('out/deep/er', exist_ok=True)
open('out/deep/er/transformed_image_0.png', 'wb').write(b'SECRET')
os.symlink('/etc/passwd', 'link')
os.mkfifo('fifo')
if os.fork() == 0:  # a grandchild that keeps writing into the folder after the call answered
    while True:
        try:
            open('late.txt', 'a').write('LATE')
        except OSError:
            pass
        time.sleep(0.001)
print(os.getuid())
"""
"""Leaves files, a symlink, a fifo and a live writer in its stateless folder, which is kept for
the next call of the same uid."""

LOOSEN_THE_FOLDER = """
import os
os.chmod('.', 0o755)
print(os.getuid())
"""
"""Leaves nothing in its folder but a looser mode on the folder itself."""

TAG_THE_FOLDER = """
import os
os.setxattr('.', 'user.secret', b'SECRET')
print(os.getuid())
"""
"""Leaves nothing in its folder but an extended attribute on the folder itself."""

MANY_FILES = """
import os
for i in range(200):
    open(f'f{i}.txt', 'w').write('SECRET')
print(os.getuid())
"""

LOOK_AT_THE_FOLDER = """
import json, os
names, out = sorted(os.listdir('.')), sorted(os.listdir('out'))
print(json.dumps({'uid': os.getuid(), 'out_inode': os.stat('out').st_ino, 'entries': names[:5] + [f'+{len(names) - 5}'] * (len(names) > 5),
                  'out': out[:5], 'xattrs': os.listxattr('.')[:5],
                  'mode': oct(os.stat('.').st_mode & 0o7777), 'owner': os.stat('.').st_uid}))
"""
"""What a call finds in its folder; ``out_inode`` is 2 in a fresh tmpfs (its root is 1, ``out`` the
first inode made in it) and larger in a folder kept from an earlier call."""
