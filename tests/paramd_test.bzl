"""paramd_cc_test: a Catch2 test of one file, NAME.cc, with its main."""

def paramd_cc_test(
        name,
        deps = [],
        size = "small",
        srcs = None,
        main = "//tests:catch_main",
        **kwargs):
    """A cc_test of `srcs` (default [NAME.cc]) linked with `main`.

    Args:
      name: the test's name; its source is NAME.cc unless `srcs` says.
      deps: what the test uses besides its main, Catch2 and Abseil.
      size: Bazel's size (every test has one).
      srcs: the sources, when not just NAME.cc.
      main: the Catch2 main: "//tests:catch_main" (plain),
        "//tests:skip_main" (skips, saying why, when a program it needs is
        missing) or "//tests:cuda_test_main" (skips without a CUDA device).
      **kwargs: data, tags, local_defines and the like, as cc_test takes them.
    """
    all_deps = [main]
    for d in deps + ["@system//:absl", "@system//:catch2"]:
        if d not in all_deps:
            all_deps.append(d)
    native.cc_test(
        name = name,
        size = size,
        srcs = srcs if srcs != None else [name + ".cc"],
        deps = all_deps,
        **kwargs
    )
