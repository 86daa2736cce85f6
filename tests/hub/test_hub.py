"""The GPU JupyterHub kit in hub/: Helm values, image, nbgitpuller links, the admin's smoke test."""

import ast
import json
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import nbformat
import pytest
import yaml

from conftest import REPO, activated, installed

sys.path.insert(0, str(REPO))  # hub/ is not installed: it runs from a checkout (or /opt/course)
import hub.links  # noqa: E402
import hub.smoke  # noqa: E402
from grader import hardware  # noqa: E402
from hub.links import lessons, link, links, repo_dir  # noqa: E402
from hub.smoke import FAIL, PASS, SKIPPED  # noqa: E402

HUB = REPO / "hub"
LESSONS = sorted(p.name for p in (REPO / "release").iterdir() if p.is_dir())


# ---- hub/config.yaml: Zero to JupyterHub values ----

@pytest.fixture(scope="module")
def singleuser():
    values = yaml.safe_load((HUB / "config.yaml").read_text())
    return values["singleuser"]


def volumes(singleuser):
    return {v["name"]: v for v in singleuser["storage"]["extraVolumes"]}


def mounts(singleuser):
    return {m["mountPath"]: m["name"] for m in singleuser["storage"]["extraVolumeMounts"]}


def test_two_profiles_ask_for_one_and_two_gpus_with_resources_to_match(singleuser):
    profiles = singleuser["profileList"]
    assert len(profiles) == 2
    overrides = [p["kubespawner_override"] for p in profiles]
    # Strings, as Kubernetes resource quantities are written in a pod spec.
    assert [o["extra_resource_limits"] for o in overrides] == [{"nvidia.com/gpu": "1"}, {"nvidia.com/gpu": "2"}]
    assert [o["environment"]["COURSE_EXPECTED_GPUS"] for o in overrides] == ["1", "2"]
    assert sum(bool(p.get("default")) for p in profiles) == 1
    one, two = overrides
    for key in ("cpu_guarantee", "cpu_limit", "mem_guarantee", "mem_limit"):
        assert key in one and key in two, key
    gib = lambda spec: float(re.fullmatch(r"(\d+(?:\.\d+)?)G", spec)[1])  # noqa: E731
    for o in overrides:
        assert o["cpu_guarantee"] <= o["cpu_limit"] and gib(o["mem_guarantee"]) <= gib(o["mem_limit"])
    # Two GPUs get twice the CPUs and memory of one (DDP runs a rank, and its loaders, per GPU).
    assert two["cpu_guarantee"] == 2 * one["cpu_guarantee"] and gib(two["mem_guarantee"]) == 2 * gib(one["mem_guarantee"])


def test_dev_shm_is_a_memory_backed_volume_mounted_at_dev_shm(singleuser):
    name = mounts(singleuser)["/dev/shm"]
    empty_dir = volumes(singleuser)[name]["emptyDir"]
    assert empty_dir["medium"] == "Memory"
    size = re.fullmatch(r"(\d+)Gi", empty_dir["sizeLimit"])
    assert size and int(size[1]) * 1024 >= hub.smoke.SHM_MIN_FREE_MIB
    # Memory-backed: it counts against the pod's memory, so it must fit in the smaller profile.
    one = singleuser["profileList"][0]["kubespawner_override"]
    assert int(size[1]) < float(one["mem_limit"].rstrip("G"))


def test_the_exchange_is_a_shared_claim_mounted_where_course_exchange_points(singleuser):
    env = singleuser["extraEnv"]
    assert env["COURSE_ID"]
    exchange = env["COURSE_EXCHANGE"]
    name = mounts(singleuser)[exchange]
    assert volumes(singleuser)[name]["persistentVolumeClaim"]["claimName"]
    assert "ReadWriteMany" in (HUB / "config.yaml").read_text()  # the claim to create, in the comments
    # The init container that opens the exchange to every user mounts the same volume there.
    init = singleuser["initContainers"][0]
    assert {"name": name, "mountPath": exchange} in init["volumeMounts"]
    assert f"chmod 0777 {exchange}" in " ".join(init["command"])
    # nbgrader_config.py reads the two variables the values set.
    config = (REPO / "nbgrader_config.py").read_text()
    assert "COURSE_EXCHANGE" in config and "COURSE_ID" in config


def test_values_use_the_chart_schema_names(singleuser):
    assert set(singleuser["image"]) == {"name", "tag"} and isinstance(singleuser["image"]["tag"], str)
    assert set(singleuser["storage"]) == {"extraVolumes", "extraVolumeMounts"}
    names = {m["name"] for m in singleuser["storage"]["extraVolumeMounts"]}
    assert names == set(volumes(singleuser)), "every volume mounted, every mount a volume"
    allowed = {"image", "defaultUrl", "startTimeout", "extraTolerations", "extraEnv", "storage",
               "initContainers", "profileList"}
    assert set(singleuser) <= allowed, set(singleuser) - allowed


# ---- Schemas: the Helm chart's for the values, Kubernetes' own for the objects in them, offline ----

K8S = "1.33"  # the Kubernetes version validated against (the chart wants 1.28 or later; the Job 1.29)
CHART = REPO / "tests" / "schemas" / "z2jh-4.4.0"  # the chart's values.schema.json and default values


def helm_values(*overrides):
    """The chart's default values with ``overrides`` coalesced over them, as Helm does: maps merged key by key,
    anything else (lists included) replaced, a null removing the key.

    >>> helm_values({"hub": {"db": {"type": "sqlite-memory"}}})["hub"]["db"]["type"]
    'sqlite-memory'
    """
    def coalesce(base, over):
        for key, value in over.items():
            if value is None:
                base.pop(key, None)
            elif isinstance(value, dict) and isinstance(base.get(key), dict):
                coalesce(base[key], value)
            else:
                base[key] = value
        return base
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    for over in overrides:
        coalesce(values, over)
    return values


def chart_errors(values):
    """What the chart's values.schema.json (the schema `helm install` checks) finds wrong with ``values``."""
    import jsonschema

    schema = json.loads((CHART / "values.schema.json").read_text())
    return [f"{'.'.join(map(str, e.path))}: {e.message}" for e in jsonschema.Draft7Validator(schema).iter_errors(values)]


def k8s_errors(obj):
    """What Kubernetes' own schema (kubernetes-validate's, strict: no unknown field) finds wrong with ``obj``."""
    import kubernetes_validate

    try:
        kubernetes_validate.validate(obj, K8S, strict=True)
    except kubernetes_validate.ValidationError as e:
        return [f"{'.'.join(map(str, e.path))}: {e.message}"]
    return []


def user_pod(singleuser, profile):
    """The parts of a user pod the values give, as a Pod: volumes, mounts, init container, tolerations, and
    ``profile``'s resources (KubeSpawner's guarantees are requests, its limits limits)."""
    o = profile["kubespawner_override"]
    container = {"name": "notebook", "image": f"{singleuser['image']['name']}:{singleuser['image']['tag']}",
                 "env": [{"name": k, "value": v} for k, v in {**singleuser["extraEnv"], **o["environment"]}.items()],
                 "volumeMounts": singleuser["storage"]["extraVolumeMounts"],
                 "resources": {"requests": {"cpu": str(o["cpu_guarantee"]), "memory": o["mem_guarantee"]},
                               "limits": {"cpu": str(o["cpu_limit"]), "memory": o["mem_limit"],
                                          **o["extra_resource_limits"]}}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "jupyter-student"},
           "spec": {"containers": [container], "initContainers": singleuser["initContainers"],
                    "volumes": singleuser["storage"]["extraVolumes"], "tolerations": singleuser["extraTolerations"]}}
    return json.loads(json.dumps(pod))  # a copy: the values stay as they are


def test_the_values_pass_the_charts_schema_and_a_misspelt_one_fails():
    values = yaml.safe_load((HUB / "config.yaml").read_text())
    assert chart_errors(helm_values(values)) == []
    misspelt = {"singleuser": {"storage": {"extraVolumeMount": values["singleuser"]["storage"]["extraVolumeMounts"]}}}
    assert any("'extraVolumeMount' was unexpected" in e for e in chart_errors(helm_values(values, misspelt)))
    assert chart_errors(helm_values(values, {"singleuser": {"startTimeout": "15 minutes"}}))


def test_the_kubernetes_objects_in_the_values_pass_kubernetes_schemas(singleuser):
    for profile in singleuser["profileList"]:
        assert k8s_errors(user_pod(singleuser, profile)) == [], profile["display_name"]
    pod = user_pod(singleuser, singleuser["profileList"][0])
    pod["spec"]["volumes"][0]["emptyDir"]["sizelimit"] = pod["spec"]["volumes"][0]["emptyDir"].pop("sizeLimit")
    assert "'sizelimit' was unexpected" in k8s_errors(pod)[0]


# ---- hub/autograde-job.yaml: the class graded in shards, an Indexed Job ----

@pytest.fixture(scope="module")
def job():
    return yaml.safe_load((HUB / "autograde-job.yaml").read_text())


def test_the_job_passes_kubernetes_schema_and_a_misspelt_field_fails(job):
    assert k8s_errors(job) == []
    misspelt = json.loads(json.dumps(job))
    misspelt["spec"]["completionMod"] = misspelt["spec"].pop("completionMode")
    assert "'completionMod' was unexpected" in k8s_errors(misspelt)[0]
    misspelt = json.loads(json.dumps(job))
    container = misspelt["spec"]["template"]["spec"]["containers"][0]
    container["volumeMount"] = container.pop("volumeMounts")
    assert "'volumeMount' was unexpected" in k8s_errors(misspelt)[0]


def test_the_jobs_pods_get_no_network(job):
    policy = yaml.safe_load((HUB / "autograde-network-policy.yaml").read_text())
    assert k8s_errors(policy) == []
    assert policy["kind"] == "NetworkPolicy"
    labels = job["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
    assert sorted(policy["spec"]["policyTypes"]) == ["Egress", "Ingress"]
    assert "egress" not in policy["spec"] and "ingress" not in policy["spec"]  # no rule: nothing allowed


def test_the_job_runs_one_shard_per_index(job):
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed" and spec["template"]["spec"]["restartPolicy"] == "Never"
    container, = spec["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert spec["completions"] == spec["parallelism"] == int(env["SHARDS"])
    assert env["LESSON"] in LESSONS and job["metadata"]["name"] == f"autograde-{env['LESSON'].replace('_', '-')}"
    command = container["command"]
    assert command[:2] == ["sh", "-c"] and command[2].startswith("exec python -m grader.grading.autograde ")
    assert '"$LESSON" --shard "$JOB_COMPLETION_INDEX/$SHARDS" --workers 1' in command[2]


def test_the_job_runs_on_the_image_and_hardware_of_a_students_profile(job, singleuser):
    pod = job["spec"]["template"]["spec"]
    container, = pod["containers"]
    assert container["image"] == f"{singleuser['image']['name']}:{singleuser['image']['tag']}"
    assert pod["tolerations"] == singleuser["extraTolerations"]
    name = job["metadata"]["annotations"]["multi-gpu-course/profile"]
    profile, = [p for p in singleuser["profileList"] if p["display_name"] == name]
    student = user_pod(singleuser, profile)["spec"]["containers"][0]
    assert container["resources"] == student["resources"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert {k: env[k] for k in ("COURSE_EXCHANGE", "COURSE_ID", "COURSE_EXPECTED_GPUS")} == \
        {e["name"]: e["value"] for e in student["env"]}


def test_the_job_mounts_the_course_directory_the_exchange_and_shared_memory(job, singleuser):
    pod = job["spec"]["template"]["spec"]
    container, = pod["containers"]
    mounted = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    job_volumes = {v["name"]: v for v in pod["volumes"]}
    # The course directory is in the instructor's home: the claim the chart makes for each user, where it mounts it.
    home = helm_values(yaml.safe_load((HUB / "config.yaml").read_text()))["singleuser"]["storage"]["homeMountPath"]
    assert Path(container["workingDir"]).is_relative_to(home) and container["workingDir"] != home
    assert job_volumes[mounted[home]]["persistentVolumeClaim"]["claimName"].startswith("claim-")
    # The exchange and /dev/shm as the user pods have them (the exchange read-only).
    for path in (singleuser["extraEnv"]["COURSE_EXCHANGE"], "/dev/shm"):
        theirs = volumes(singleuser)[mounts(singleuser)[path]]
        ours = dict(job_volumes[mounted[path]], name=theirs["name"])
        if "persistentVolumeClaim" in ours:
            assert ours["persistentVolumeClaim"].pop("readOnly") is True
        assert ours == theirs, path
    assert pod["securityContext"] == {"runAsUser": 1000, "runAsGroup": 100, "fsGroup": 100}  # the chart's user pods'


# ---- hub/Dockerfile ----

@pytest.fixture(scope="module")
def dockerfile():
    return (HUB / "Dockerfile").read_text()


def test_the_image_starts_from_a_pinned_cuda_pytorch_notebook(dockerfile):
    base = re.search(r"^ARG BASE_IMAGE=(\S+)$", dockerfile, re.M)[1]
    assert re.fullmatch(r"quay\.io/jupyter/pytorch-notebook:cuda1\d-\d{4}-\d{2}-\d{2}", base), base
    froms = re.findall(r"^FROM (.+)$", dockerfile, re.M)
    assert froms == ["${BASE_IMAGE}"]


def test_the_course_is_installed_without_replacing_the_images_torch(dockerfile):
    run = next(block for block in dockerfile.split("\n\n") if "pip install" in block and "/opt/course" in block)
    # The torch stack is frozen into a constraint file, the course installed under it, and
    # the stack compared afterwards.
    assert re.search(r"pip list --format=freeze \| grep -iE \"\$\{stack\}\" > /tmp/torch-stack\.txt", run)
    assert "pip install --no-cache-dir --constraint /tmp/torch-stack.txt /opt/course" in run
    assert re.search(r"pip list --format=freeze \| grep -iE \"\$\{stack\}\" \| diff /tmp/torch-stack\.txt -", run)
    assert "torch.version.cuda" in run
    for forbidden in ("--upgrade", " -U ", "--force-reinstall", "--ignore-installed", "index-url"):
        assert forbidden not in dockerfile, forbidden
    for line in re.findall(r"pip install[^\n]*", dockerfile):  # torch itself is never asked for
        assert not any(re.match(r"['\"]?torch(vision|audio)?([=<>~!\[]|['\"]?$)", arg) for arg in line.split()), line
    # The stack pattern catches the CUDA build's packages and nothing else.
    stack = re.compile(re.search(r"stack='([^']+)'", run)[1], re.I)
    frozen = ["torch==2.12.0+cu128", "torchvision==0.27.0+cu128", "triton==3.6.0",
              "nvidia-nccl-cu12==2.28.3", "nvidia_cudnn_cu12==9.10.2.21", "torchmetrics==1.8.0", "numpy==2.3.4"]
    assert [line for line in frozen if stack.search(line)] == frozen[:5]


def test_pyproject_leaves_torch_a_range_the_constraint_can_meet():
    import tomllib

    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    torch = next(d for d in deps if re.match(r"torch\b", d))
    assert re.fullmatch(r"torch>=[\d.]+", torch.split("#")[0].strip()), torch


def test_the_image_copies_the_course_but_not_its_solutions(dockerfile):
    copied = [p for line in re.findall(r"^COPY --chown=\S+ (.+) /opt/course/\S*$", dockerfile, re.M)
              for p in line.split()]
    assert {"pyproject.toml", "README.md", "nbgrader_config.py", "grader/", "release/", "hub/"} <= set(copied)
    for path in copied:
        assert (REPO / path).exists(), path
    assert not any(p.startswith("source") for p in copied), "source/ holds solutions and hidden tests"
    ignore = (HUB / "Dockerfile.dockerignore").read_text().split()
    assert {".git", ".venv", "source"} <= set(ignore)
    # Students' nbgrader loads the course's settings (and so COURSE_EXCHANGE / COURSE_ID).
    assert 'load_subconfig("/opt/course/nbgrader_config.py")' in dockerfile
    assert "/etc/jupyter/nbgrader_config.py" in dockerfile


def test_the_image_has_nbgitpuller_and_names_real_nbgrader_extensions(dockerfile):
    assert re.search(r"^ARG NBGITPULLER_VERSION=\d+\.\d+\.\d+$", dockerfile, re.M)
    assert '"nbgitpuller==${NBGITPULLER_VERSION}"' in dockerfile
    assert "jupyter server extension enable --sys-prefix nbgitpuller" in dockerfile
    # Every extension the Dockerfile names exists in the nbgrader installed here.
    import importlib

    import nbgrader

    for module in set(re.findall(r"nbgrader\.server_extensions\.\w+", dockerfile)):
        importlib.import_module(module)
    bundle = "".join(p.read_text(errors="ignore") for p in
                     (Path(nbgrader.__file__).parent / "labextension" / "static").glob("*.js"))
    plugins = set(re.findall(r"@jupyter/nbgrader:[a-z-]+", dockerfile))
    assert plugins == {"@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment"}
    for plugin in plugins:
        assert f'"{plugin}"' in bundle or f"'{plugin}'" in bundle, plugin


# ---- hub/links.py: nbgitpuller links ----

def query(url):
    parts = urlsplit(url)
    return parts, {k: v[0] for k, v in parse_qs(parts.query, strict_parsing=True).items()}


def test_links_open_the_course_and_every_lesson_in_jupyterlab():
    pairs = links("https://hub.example.edu", "https://github.com/ORG/multi-gpu-course", "main")
    assert [name for name, _ in pairs] == ["course", *LESSONS]
    for name, url in pairs:
        parts, q = query(url)
        assert (parts.scheme, parts.netloc, parts.path) == ("https", "hub.example.edu", "/hub/user-redirect/git-pull")
        assert list(q) == ["repo", "branch", "urlpath"]
        assert q["repo"] == "https://github.com/ORG/multi-gpu-course" and q["branch"] == "main"
        want = "lab/tree/multi-gpu-course" + ("" if name == "course" else f"/release/{name}/{name}.ipynb")
        assert q["urlpath"] == want
        if name != "course":
            assert (REPO / q["urlpath"].removeprefix("lab/tree/multi-gpu-course/")).exists()
        # Encoded as nbgitpuller's link generator encodes (URLSearchParams): no raw / or : in values.
        assert "/" not in parts.query and ":" not in parts.query


def test_links_follow_nbgitpullers_folder_and_keep_a_hubs_path_prefix():
    assert repo_dir("https://gitlab.example.edu/group/sub/course.git") == "course.git"
    url = link("https://example.edu/jupyter/", "https://github.com/ORG/course/", "student", "release/x/x.ipynb")
    parts, q = query(url)
    assert parts.path == "/jupyter/hub/user-redirect/git-pull"
    assert q == {"repo": "https://github.com/ORG/course", "branch": "student", "urlpath": "lab/tree/course/release/x/x.ipynb"}
    for bad in [("hub.example.edu", "https://github.com/o/r", "main"), ("https://h", "https://github.com/o/r", ""),
                ("https://h", "https://github.com/", "main")]:
        with pytest.raises(ValueError):
            link(*bad)


def test_links_command_prints_one_link_per_lesson(tmp_path, capsys):
    assert hub.links.main(["--hub", "https://hub.example.edu", "--repo", "https://github.com/ORG/REPO"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == ["course", *LESSONS]
    assert all(query(line.split()[1])[1]["branch"] == "main" for line in lines)
    # Lessons come from release/*/ of the course directory given.
    (tmp_path / "release" / "07_new").mkdir(parents=True)
    (tmp_path / "release" / "07_new" / "07_new.ipynb").write_text("{}")
    (tmp_path / "release" / "notes").mkdir()
    assert lessons(tmp_path) == ["07_new"]
    hub.links.main(["--hub", "https://h.example", "--repo", "https://github.com/o/r", "--course", str(tmp_path),
                    "--markdown"])
    assert capsys.readouterr().out.splitlines()[1].startswith("- [07_new](https://h.example/hub/user-redirect/")


# ---- hub/smoke.py: the admin's smoke test ----

def fake_gpus(monkeypatch, n, name="NVIDIA H100 80GB HBM3"):
    monkeypatch.setattr(hardware, "gpu_count", lambda: n)
    monkeypatch.setattr(hardware, "gpus", lambda: [hardware.GPU(i, name, 79.1) for i in range(n)])


def test_gpu_check_compares_with_the_expected_count(monkeypatch):
    fake_gpus(monkeypatch, 2)
    assert hub.smoke.check_gpus(2).status == PASS
    skipped = hub.smoke.check_gpus(None)
    assert skipped.status == SKIPPED and "COURSE_EXPECTED_GPUS" in skipped.reason


def test_a_pod_that_sees_every_gpu_of_its_node_fails_and_says_so(monkeypatch):
    fake_gpus(monkeypatch, 8)
    monkeypatch.setenv("NVIDIA_VISIBLE_DEVICES", "all")
    result = hub.smoke.check_gpus(1)
    assert result.status == FAIL
    assert "8 visible" in result.reason and "1 expected" in result.reason
    assert "every GPU of its node" in result.reason and "NVIDIA_VISIBLE_DEVICES=all" in result.reason
    assert "volume-mounts" in result.reason


def test_a_pod_without_its_gpus_fails_with_a_cause(monkeypatch):
    fake_gpus(monkeypatch, 0)
    result = hub.smoke.check_gpus(1)
    assert result.status == FAIL and ("no GPU visible" in result.reason or "CPU build" in result.reason)


def test_nccl_is_skipped_below_two_gpus_with_the_reason(monkeypatch):
    fake_gpus(monkeypatch, 1)
    result = hub.smoke.check_nccl()
    assert result.status == SKIPPED and "needs 2 GPUs or more, this pod sees 1" in result.reason


def test_nccl_from_a_kernel_is_skipped_below_two_gpus_with_the_reason(monkeypatch):
    fake_gpus(monkeypatch, 1)
    monkeypatch.setattr(hub.smoke, "kernel_launch_check", lambda *a: pytest.fail("no kernel below 2 GPUs"))
    result = hub.smoke.check_nccl_kernel()
    assert result.check == "nccl from a kernel"
    assert result.status == SKIPPED and "needs 2 GPUs or more, this pod sees 1" in result.reason


def test_nccl_from_a_kernel_launches_one_nccl_rank_per_gpu_after_touching_cuda(monkeypatch):
    fake_gpus(monkeypatch, 4)
    calls = []
    monkeypatch.setattr(hub.smoke, "kernel_launch_check", lambda *a: calls.append(a) or "ran")
    assert hub.smoke.check_nccl_kernel() == "ran" and calls == [("nccl", 4)]
    touch, run = hub.smoke.kernel_code("nccl", 4)
    for cell in (touch, run):
        ast.parse(cell)
    assert 'torch.cuda.device_count()' in touch and 'device="cuda"' in touch  # CUDA started first
    assert 'launch(all_reduce, nprocs=4, backend="nccl"' in run and "dist.all_reduce" in run


@pytest.mark.slow
def test_ranks_launched_from_a_real_kernel_all_reduce():
    # The kernel path of "nccl from a kernel", on CPU: gloo ranks started from a Jupyter kernel.
    result = hub.smoke.kernel_launch_check("gloo", 2)
    assert result.check == "gloo from a kernel"
    assert result.status == PASS and result.reason.startswith("2 ranks (cpu, cpu) agree"), result


def mountinfo(tmp_path, *mounts):
    """A fake /proc/self/mountinfo holding ``(mount point, filesystem type)`` mounts, in order."""
    lines = [f"{20 + i} 1 0:{20 + i} / {point.replace(' ', chr(92) + '040')} rw,relatime - {kind} none rw"
             for i, (point, kind) in enumerate(mounts)]
    path = tmp_path / "mountinfo"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def plenty(monkeypatch):
    """Every mount has 8 GiB free, above the /dev/shm threshold."""
    real = hardware.shutil.disk_usage
    monkeypatch.setattr(hardware.shutil, "disk_usage", lambda p: real(p)._replace(total=16 * 2**30, free=8 * 2**30))


@pytest.mark.parametrize("kind", ["ext4", "overlay", "xfs"])
def test_a_disk_backed_dev_shm_fails_however_large(monkeypatch, tmp_path, kind):
    plenty(monkeypatch)
    shm = tmp_path / "shm"
    shm.mkdir()
    info = mountinfo(tmp_path, ("/", "overlay"), (str(shm.resolve()), kind))
    result = hub.smoke.check_shm(str(shm), info)
    assert result.status == FAIL, result
    assert f"({kind})" in result.reason and f"{kind} filesystem" in result.reason and "not in memory" in result.reason
    assert "8192 MiB free" in result.reason
    assert "medium: Memory" in result.reason and "--shm-size" in result.reason


def test_a_tmpfs_dev_shm_with_room_passes(monkeypatch, tmp_path):
    plenty(monkeypatch)
    shm = tmp_path / "shm"
    shm.mkdir()
    # The same point mounted twice: the last mount, on top, is the one seen.
    info = mountinfo(tmp_path, ("/", "ext4"), (str(shm.resolve()), "ext4"), (str(shm.resolve()), "tmpfs"))
    result = hub.smoke.check_shm(str(shm), info)
    assert result.status == PASS and "(tmpfs)" in result.reason, result
    assert hub.smoke.check_shm(str(shm), str(tmp_path / "no-mountinfo")).status == PASS  # type unknown: size only


def test_the_mount_holding_a_path_is_the_longest_prefix(tmp_path):
    root = str(tmp_path.resolve())
    (tmp_path / "shm" / "inner dir" / "x").mkdir(parents=True)
    (tmp_path / "shmother").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "shm" / "inner dir")
    info = mountinfo(tmp_path, ("/", "ext4"), (root + "/shm/inner dir", "overlay"), (root + "/shm", "tmpfs"))
    assert hub.smoke.mount_of(root + "/shm/inner dir/x", info) == (root + "/shm/inner dir", "overlay")
    assert hub.smoke.mount_of(str(tmp_path / "link"), info) == (root + "/shm/inner dir", "overlay")  # resolved
    assert hub.smoke.mount_of(root + "/shm/x", info) == (root + "/shm", "tmpfs")
    assert hub.smoke.mount_of(root + "/shmother", info) == ("/", "ext4")  # a prefix of the name is no mount
    assert hub.smoke.check_shm(root + "/shm/inner dir/x", info).status == FAIL


def test_shm_threshold_is_the_launchers(monkeypatch, tmp_path):
    source = Path(hardware.__file__).read_text()
    assert int(re.search(r"free_mib < (\d+)", source)[1]) == hub.smoke.SHM_MIN_FREE_MIB
    assert hub.smoke.check_shm(str(tmp_path / "missing")).status == FAIL
    real = hardware.shutil.disk_usage
    monkeypatch.setattr(hardware.shutil, "disk_usage",
                        lambda p: real(p)._replace(total=64 * 2**20, free=60 * 2**20))
    small = hub.smoke.check_shm(str(tmp_path))
    assert small.status == FAIL and "60 MiB free" in small.reason and "512 MiB" in small.reason
    assert "emptyDir" in small.reason


def test_exchange_check(monkeypatch, tmp_path):
    for var in ("COURSE_EXCHANGE", "JUPYTERHUB_API_URL", "JUPYTERHUB_USER"):
        monkeypatch.delenv(var, raising=False)
    assert hub.smoke.check_exchange().status == SKIPPED
    monkeypatch.setenv("JUPYTERHUB_API_URL", "http://hub:8081/hub/api")
    assert hub.smoke.check_exchange().status == FAIL  # on a hub, the exchange must be set
    monkeypatch.setenv("COURSE_EXCHANGE", str(tmp_path / "nowhere"))
    assert "not a directory" in hub.smoke.check_exchange().reason
    monkeypatch.setenv("COURSE_EXCHANGE", str(tmp_path))
    assert hub.smoke.check_exchange().status == PASS


def test_a_torch_older_than_the_lessons_fails_the_torch_check(monkeypatch):
    import torch

    monkeypatch.setattr(torch, "__version__", "2.7.1+cu126")
    result = hub.smoke.check_torch()
    assert result.status == FAIL and "torch 2.7.1+cu126 is older than 2.8" in result.reason


def test_a_check_that_raises_fails_and_the_rest_still_run(monkeypatch):
    def broken():
        raise RuntimeError("no driver")
    monkeypatch.setattr(hub.smoke, "check_gloo", broken)
    monkeypatch.setattr(hub.smoke, "check_lesson", lambda *a: hub.smoke.Result("lesson", SKIPPED, "not here"))
    results = {r.check: r for r in hub.smoke.run_checks(expected_gpus=hardware.gpu_count())}
    assert results["gloo all-reduce"].status == FAIL and "RuntimeError: no driver" in results["gloo all-reduce"].reason
    assert list(results) == ["course", "torch", "gpus", "/dev/shm", "gloo all-reduce", "nccl all-reduce",
                             "nccl from a kernel", "fsdp step", "pipeline", "overlap", "lesson", "exchange", "nbgitpuller"]


@pytest.mark.slow
def test_a_lesson_that_raises_fails_the_lesson_check(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print('hi')"),
                                         nbformat.v4.new_code_cell("1 / 0")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "broken.ipynb"
    nbformat.write(nb, path)
    result = hub.smoke.check_lesson(path, cells=2)
    assert result.status == FAIL and "ZeroDivisionError" in result.reason
    assert hub.smoke.check_lesson(path, cells=1).status == PASS


@pytest.mark.slow
def test_a_toolkit_imported_from_the_course_folder_fails_the_course_check():
    # Here (the checkout's editable install) grader comes from the folder; students' kernels import the package.
    result = hub.smoke.check_course()
    assert result.status == FAIL and "not from an installed package" in result.reason


def test_smoke_test_passes_on_this_machine_with_gpu_parts_skipped_visibly():
    env = activated()
    for var in ("COURSE_EXPECTED_GPUS", "COURSE_EXCHANGE", "JUPYTERHUB_API_URL", "JUPYTERHUB_USER"):
        env.pop(var, None)
    # As the admin runs it on the hub (cd /opt/course && python -m hub.smoke), with the course installed.
    proc = subprocess.run([installed()[0], "-m", "hub.smoke"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    checked = [re.match(r"(PASS|FAIL|SKIPPED) +(.+?): ", line) for line in proc.stdout.splitlines()]
    lines = {m[2]: m.string for m in checked if m}
    status = {check: line.split()[0] for check, line in lines.items()}
    report = f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr[-2000:]}"
    assert status["course"] == PASS and status["gloo all-reduce"] == PASS, report
    assert status["torch"] == PASS and "the lessons need 2.8 or newer" in lines["torch"], report
    # Lesson 03's FSDP2 step and pipeline, and lesson 05's overlap, on the ranks the lessons use here
    # (CPU processes below 2 GPUs).
    assert status["fsdp step"] == PASS and status["pipeline"] == PASS and status["overlap"] == PASS, report
    if hardware.gpu_count() < 2:
        assert "2 ranks (cpu, cpu, gloo) trained 2 fully_shard steps equal" in lines["fsdp step"], report
        assert "2 stages (gloo), 1F1B over 4 micro-batches: every forward and backward ran" in lines["pipeline"], report
        assert "2 ranks (gloo) started all 6 gradients' all-reduces from hooks during backward" in lines["overlap"], report
    assert f"grader from {installed()[0].parents[1]}" in lines["course"], report
    assert status["lesson"] == PASS, report
    if not hardware.gpu_count():
        assert "CPU only" in lines["lesson"], report  # what the lesson's first cell printed
    assert status["gpus"] == SKIPPED and "COURSE_EXPECTED_GPUS" in lines["gpus"], report
    if hardware.gpu_count() < 2:
        for check in ("nccl all-reduce", "nccl from a kernel"):
            assert status[check] == SKIPPED and "needs 2 GPUs or more" in lines[check], report
    assert status["exchange"] == SKIPPED and status["nbgitpuller"] in (PASS, SKIPPED), report
    # A machine whose /dev/shm is short (a container's 64 MiB) or on disk fails that check, and only that one.
    shm_bad = hub.smoke.check_shm().status == FAIL
    assert status["/dev/shm"] == (FAIL if shm_bad else PASS), report
    assert [c for c, s in status.items() if s == FAIL] == (["/dev/shm"] if shm_bad else []), report
    assert proc.returncode == (1 if shm_bad else 0), report
    assert proc.stdout.splitlines()[-1].startswith("smoke test: ")
