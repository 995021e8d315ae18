"""Finds the CUDA toolkit (nvcc, cuBLAS) at build time.

Creates @local_cuda with defs.bzl (HAS_CUDA, NVCC, CUDA_LIB) and a `cuda`
cc_library. Without a toolkit, HAS_CUDA is False and the worker's CUDA
backend is replaced by one that says it was left out.
"""

def _local_cuda_impl(ctx):
    root = ctx.attr.path
    nvcc = ctx.path(root + "/bin/nvcc")
    have = nvcc.exists and ctx.path(root + "/include/cublas_v2.h").exists
    if have:
        ctx.symlink(root + "/include", "include")
        lib = root + "/lib64"
        ctx.file("defs.bzl", "HAS_CUDA = True\nNVCC = \"%s\"\nCUDA_LIB = \"%s\"\n" % (nvcc, lib))
        ctx.file("BUILD", """package(default_visibility = ["//visibility:public"])

cc_library(
    name = "cuda",
    hdrs = glob(["include/**"]),
    includes = ["include"],
    linkopts = ["-L{lib}", "-lcublas", "-lcudart", "-Wl,-rpath,{lib}"],
)
""".format(lib = lib))
    else:
        ctx.file("defs.bzl", "HAS_CUDA = False\nNVCC = \"\"\nCUDA_LIB = \"\"\n")
        ctx.file("BUILD", """package(default_visibility = ["//visibility:public"])

cc_library(name = "cuda")
""")

local_cuda = repository_rule(
    implementation = _local_cuda_impl,
    attrs = {"path": attr.string(default = "/usr/local/cuda")},
    local = True,
)
