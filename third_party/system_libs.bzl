"""Repository rules exposing Debian's system libraries and LibTorch to Bazel offline.

Each library becomes one cc_library whose link flags come from pkg-config, so the
flags track what Debian actually ships (Abseil alone is ~60 archives).
"""

# target name -> pkg-config modules
_PKG_CONFIG_LIBS = {
    "absl": [
        "absl_status",
        "absl_statusor",
        "absl_strings",
        "absl_str_format",
        "absl_synchronization",
        "absl_flags",
        "absl_flags_parse",
        "absl_time",
        "absl_random_random",
        "absl_hash",
        "absl_raw_hash_set",
    ],
    "glog": ["libglog"],
    "protobuf": ["protobuf"],
    "gtest": ["gtest", "gmock"],
    "gtest_main": ["gtest_main", "gmock"],
    "benchmark": ["benchmark"],
    "benchmark_main": ["benchmark_main"],
    "zlib": ["zlib"],
    "lemon": ["lemon"],
    "crypto": ["libcrypto"],  # OpenSSL: secure aggregation's X25519, HKDF, ChaCha20
    "grpc": ["grpc++"],  # deployment across machines (fl/deploy)
}

# Debian libraries that ship no pkg-config file: target name -> link flags.
_LINK_ONLY_LIBS = {
    "alglib": ["-lalglib"],  # libalglib-dev; headers under /usr/include/libalglib
    "boost_crc": [],  # libboost-dev's header-only boost/crc.hpp: TensorBoard records' CRC-32C
}

def _pkg_config(ctx, flag, modules):
    result = ctx.execute(["pkg-config", flag] + modules)
    if result.return_code != 0:
        fail("pkg-config %s %s failed (run tools/setup.sh to install the Debian packages): %s" %
             (flag, " ".join(modules), result.stderr))
    return [f for f in result.stdout.strip().split(" ") if f]

def _system_libs_impl(ctx):
    build = ['package(default_visibility = ["//visibility:public"])\n']
    for name, modules in _PKG_CONFIG_LIBS.items():
        if name == "benchmark_main" and ctx.execute(["pkg-config", "--exists", "benchmark_main"]).return_code != 0:
            # Debian 12 ships benchmark_main as a library without its own .pc file.
            defines, linkopts = [], ["-lbenchmark_main"] + _pkg_config(ctx, "--libs", ["benchmark"])
        else:
            cflags = _pkg_config(ctx, "--cflags", modules)
            defines = [f[2:] for f in cflags if f.startswith("-D")]
            linkopts = _pkg_config(ctx, "--libs", modules)
        build.append("""
cc_library(
    name = "{name}",
    defines = {defines},
    linkopts = {linkopts},
)
""".format(name = name, defines = repr(defines), linkopts = repr(linkopts)))
    for name, linkopts in _LINK_ONLY_LIBS.items():
        build.append("""
cc_library(
    name = "{name}",
    linkopts = {linkopts},
)
""".format(name = name, linkopts = repr(linkopts)))
    ctx.file("BUILD", "".join(build))
    ctx.file("WORKSPACE", 'workspace(name = "%s")\n' % ctx.name)

system_libs_repository = repository_rule(
    implementation = _system_libs_impl,
    local = True,
)

# What selects the LibTorch build: LIBTORCH_PATH names any torch folder (one holding
# include/ and lib/); FEDKIT_TORCH_VERSION (set by --config=torch2) names the pinned
# PyTorch that tools/setup_torch2.sh fetched; neither means Debian's /usr.
# FEDKIT_TORCH_CUDA=1 (--config=cuda) links its CUDA libraries too.
_TORCH_ENV = ["LIBTORCH_PATH", "FEDKIT_TORCH_VERSION", "FEDKIT_TORCH2_DIR", "FEDKIT_TORCH_CUDA", "HOME"]

def _torch_root(ctx):
    """The LibTorch folder this build uses: /usr (Debian's) or a torch package's folder."""
    root = _selected_torch_root(ctx)
    if not ctx.path(root + "/include/torch/csrc/api/include/torch/torch.h").exists:
        fail("LibTorch not found: %s/include/torch/csrc/api/include/torch/torch.h is missing. " % root +
             "Install Debian's libtorch-dev (tools/setup.sh does), run tools/setup_torch2.sh for " +
             "--config=torch2, or set LIBTORCH_PATH to a folder holding include/ and lib/.")
    return root

def _selected_torch_root(ctx):
    env = ctx.os.environ
    if env.get("LIBTORCH_PATH"):
        root = env["LIBTORCH_PATH"].rstrip("/") or "/"
        if root == "/usr" or not ctx.path(root).exists:
            return root  # _torch_root reports a missing folder with instructions
        return str(ctx.path(root).realpath)
    version = env.get("FEDKIT_TORCH_VERSION", "")
    if not version:
        return "/usr"
    cache = env.get("FEDKIT_TORCH2_DIR") or "%s/.cache/fedkit/torch-%s" % (env.get("HOME", ""), version)
    root = cache + "/torch"
    version_file = ctx.path(root + "/version.py")
    if not version_file.exists:
        fail("--config=torch2: PyTorch %s is not set up in %s: run tools/setup_torch2.sh" % (version, cache))
    found = [l for l in ctx.read(version_file).splitlines() if l.startswith("__version__")]
    if not found or ("'%s" % version) not in found[0]:
        fail("--config=torch2: %s has %s, expected torch %s: run tools/setup_torch2.sh" %
             (version_file, found[0] if found else "no __version__", version))
    return str(ctx.path(root).realpath)

def _torch_libdir(ctx, root):
    if root == "/usr":
        return "/usr/lib/" + ctx.execute(["gcc", "-print-multiarch"]).stdout.strip()
    return root + "/lib"

def _libtorch_impl(ctx):
    root = _torch_root(ctx)
    ctx.symlink(root + "/include/torch/csrc/api/include", "api_include")
    includes = ["api_include"]
    hdrs = ['"api_include/**"']
    defines = []
    if root != "/usr":
        # Outside /usr the core headers (ATen, c10, torch) are not on the default search
        # path. A pip wheel's include/ also carries its own protobuf (google/) and
        # pybind11, older than Debian's: exposed, they would shadow the ones fedkit
        # builds with, so every other folder is linked in one by one.
        for entry in ctx.path(root + "/include").readdir():
            if entry.basename not in ("google", "pybind11"):
                ctx.symlink(entry, "include/" + entry.basename)
        includes.append("include")
        hdrs.append('"include/**"')
        macros = ctx.read(root + "/include/c10/macros/cmake_macros.h")
        if "#define C10_USE_GLOG" not in macros:
            # A c10 built without glog defines LOG and CHECK itself, and which of its
            # and glog's wins would depend on include order; with this it uses glog's.
            defines.append("C10_USE_GLOG")

    libdir = _torch_libdir(ctx, root)
    libs = ["-ltorch", "-ltorch_cpu", "-lc10"]
    cuda = ctx.os.environ.get("FEDKIT_TORCH_CUDA", "") == "1"
    if cuda:
        if not ctx.path(libdir + "/libtorch_cuda.so").exists:
            fail("--config=cuda: %s/libtorch_cuda.so is missing: this LibTorch has no CUDA" % libdir)

        # Nothing references libtorch_cuda directly; --no-as-needed keeps its kernels registered.
        libs = ["-Wl,--no-as-needed", "-ltorch_cuda", "-lc10_cuda", "-Wl,--as-needed"] + libs
    linkopts = ["-L" + libdir, "-Wl,-rpath," + libdir] + libs + ["-lpthread"]
    if root != "/usr":
        # PyPI's libtorch.so exports its own copy of parts of libstdc++'s
        # std::filesystem, some with null internals (remove_all crashed a program that
        # found it first): the system's libstdc++ goes before it in the search order.
        linkopts = ["-Wl,--push-state,--no-as-needed", "-lstdc++", "-Wl,--pop-state"] + linkopts

    ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])

# LibTorch from {root} (CUDA linked: {cuda}).
cc_library(
    name = "libtorch",
    hdrs = glob([{hdrs}], allow_empty = True),
    defines = {defines},
    includes = {includes},
    linkopts = {linkopts},
)
""".format(
        root = root,
        cuda = cuda,
        hdrs = ", ".join(hdrs),
        defines = repr(defines),
        includes = repr(includes),
        linkopts = repr(linkopts),
    ))
    ctx.file("WORKSPACE", 'workspace(name = "%s")\n' % ctx.name)

libtorch_repository = repository_rule(
    implementation = _libtorch_impl,
    environ = _TORCH_ENV,
    local = True,
)

def _python_query(ctx, python, code):
    result = ctx.execute([python, "-c", code])
    if result.return_code != 0:
        fail("%s -c '%s' failed: %s" % (python, code, result.stderr))
    return result.stdout.strip()

def _python_impl(ctx):
    # The interpreter: FEDKIT_PYTHON (tools/build_wheel.sh names one), else the
    # torch2 configuration's venv, else Debian's python3 (whose python3-torch shares
    # libtorch1.13 with the C++ build).
    root = _torch_root(ctx)
    python = ctx.os.environ.get("FEDKIT_PYTHON", "")
    if not python:
        # A pip-installed torch sits in <prefix>/lib/pythonX.Y/site-packages/torch.
        python = "/usr/bin/python3" if root == "/usr" else str(ctx.path(root).dirname.dirname.dirname.dirname) + "/bin/python"
    if not ctx.path(python).exists:
        fail("Python interpreter %s is missing: tools/setup.sh installs Debian's, " % python +
             "tools/setup_torch2.sh the torch2 venv's; with LIBTORCH_PATH, set FEDKIT_PYTHON to " +
             "the Python whose torch that is (or leave //fl/python/... out of the build)")

    include = _python_query(ctx, python, "import sysconfig; print(sysconfig.get_paths()['include'])")
    if not ctx.path(include + "/Python.h").exists:
        fail("Python.h not found under %s: install python3-dev (tools/setup.sh does)" % include)
    if root == "/usr":
        pybind11 = "/usr/include/pybind11"
        if not ctx.path(pybind11 + "/pybind11.h").exists:
            fail("pybind11 not found: install pybind11-dev (tools/setup.sh does)")
        site = ""
    else:
        # The pybind11 torch itself was built with, which knows Python 3.12 (Debian's
        # 2.10 does not).
        pybind11 = root + "/include/pybind11"
        site = str(ctx.path(root).dirname)
    ctx.symlink(include, "python_include")
    ctx.symlink(pybind11, "pybind11_include/pybind11")
    torch_libdir = _torch_libdir(ctx, root)
    libdir = _python_query(ctx, python, "import sysconfig; print(sysconfig.get_config_var('LIBDIR'))")
    version = _python_query(ctx, python, "import sysconfig; print(sysconfig.get_config_var('LDVERSION'))")
    ctx.file("BUILD", """
load("@bazel_tools//tools/python:toolchain.bzl", "py_runtime_pair")

package(default_visibility = ["//visibility:public"])

# Python headers from {python} ({include}), pybind11 ({pybind11}), and LibTorch's
# Python bindings (libtorch_python, which that Python's torch._C uses too): what an
# extension module needs to hand tensors to Python's torch without copies.
cc_library(
    name = "pybind11",
    hdrs = glob(["python_include/**", "pybind11_include/**"]),
    includes = ["python_include", "pybind11_include"],
    linkopts = ["-L{torch_libdir}", "-Wl,-rpath,{torch_libdir}", "-ltorch_python"],
)

# libpython itself, for a C++ program that runs Python inside it (a test that
# drives Python plugins through the C++ suites); EMBED_ENV in defs.bzl is the
# environment such a program needs to import the same torch.
cc_library(
    name = "embed",
    linkopts = ["-L{libdir}", "-Wl,-rpath,{libdir}", "-lpython{version}"],
    deps = [":pybind11"],
)

# py_binary and py_test run under this interpreter, not whatever python3 comes first
# on PATH (a pyenv shim may, with no version set). Registered in .bazelrc with
# --extra_toolchains.
py_runtime(
    name = "runtime",
    interpreter_path = "{python}",
    python_version = "PY3",
    # The launcher Bazel writes for each py_binary; its default, /usr/bin/env python,
    # finds no interpreter where python is a pyenv shim or absent (Debian has none).
    stub_shebang = "#!{python}",
)

py_runtime_pair(
    name = "runtime_pair",
    py3_runtime = ":runtime",
)

toolchain(
    name = "toolchain",
    toolchain = ":runtime_pair",
    toolchain_type = "@bazel_tools//tools/python:toolchain_type",
)
""".format(
        python = python,
        include = include,
        pybind11 = pybind11,
        torch_libdir = torch_libdir,
        libdir = libdir,
        version = version,
    ))
    # The wheel tags of this Python (cp311-cp311-linux_x86_64), for fl/python:wheel.
    wheel_tags = _python_query(ctx, python, "import sys, sysconfig; t = 'cp%d%d' % sys.version_info[:2]; " +
                                            "print(t + '-' + t + '-' + sysconfig.get_platform().replace('-', '_').replace('.', '_'))")
    # PYTHON_SITE: the site-packages holding this build's torch when it is not the
    # interpreter's system one (the torch2 venv's), for tests that make venvs.
    ctx.file("defs.bzl", "EMBED_ENV = %s\nWHEEL_TAGS = %s\nPYTHON = %s\nPYTHON_SITE = %s\n" % (
        repr({"PYTHONPATH": site} if site else {}),
        repr(wheel_tags),
        repr(python),
        repr(site),
    ))
    ctx.file("WORKSPACE", 'workspace(name = "%s")\n' % ctx.name)

python_repository = repository_rule(
    implementation = _python_impl,
    environ = _TORCH_ENV + ["FEDKIT_PYTHON"],
    local = True,
)
