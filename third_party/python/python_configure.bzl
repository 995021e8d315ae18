"""Finds Python's headers (Debian's python3-dev) for the native module.

Creates @local_python with defs.bzl (HAS_PYTHON, PYTHON, WHEEL_TAG) and a `headers`
cc_library (Python.h; pybind11's headers are in /usr/include already).
Without them, HAS_PYTHON is False and python/ builds nothing.
"""

def _local_python_impl(ctx):
    python = ctx.attr.interpreter
    found = ctx.execute([python, "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"])
    include = found.stdout.strip() if found.return_code == 0 else ""
    have = include != "" and ctx.path(include + "/Python.h").exists and \
           ctx.path("/usr/include/pybind11/pybind11.h").exists
    # The wheel's tags (python/BUILD's wheel): this interpreter's, e.g.
    # cp311-cp311-linux_x86_64.
    tag = ctx.execute([python, "-c", "import sys, sysconfig; v = 'cp%d%d' % sys.version_info[:2]; print(v + '-' + v + '-' + sysconfig.get_platform().replace('-', '_').replace('.', '_'))"])
    wheel_tag = tag.stdout.strip() if tag.return_code == 0 else "py3-none-any"
    if have:
        ctx.symlink(include, "include")
        ctx.file("defs.bzl", "HAS_PYTHON = True\nPYTHON = \"%s\"\nWHEEL_TAG = \"%s\"\n" % (python, wheel_tag))
        ctx.file("BUILD", """package(default_visibility = ["//visibility:public"])

cc_library(
    name = "headers",
    hdrs = glob(["include/**/*.h"]),
    includes = ["include"],
)
""")
    else:
        ctx.file("defs.bzl", "HAS_PYTHON = False\nPYTHON = \"%s\"\nWHEEL_TAG = \"%s\"\n" % (python, wheel_tag))
        ctx.file("BUILD", """package(default_visibility = ["//visibility:public"])

cc_library(name = "headers")
""")

local_python = repository_rule(
    implementation = _local_python_impl,
    attrs = {"interpreter": attr.string(default = "/usr/bin/python3")},
    local = True,
)
