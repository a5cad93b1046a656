"""The JobSet fixture's parts that need no binaries running: which build it takes, and the webhook
configurations it registers."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from pysched.api.jobs import JOBSET_LABEL
from pysched.testing.controlplane import BinariesNotFound
from pysched.testing.jobset import (
    JOBSET_BIN_ENV,
    JOBSET_BINARY,
    JOBSET_VERSION,
    find_jobset_bin_dir,
    webhook_configurations,
)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PYSCHED_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(JOBSET_BIN_ENV, raising=False)
    return tmp_path


def fake_build(root: Path, listed: str) -> Path:
    out = root / "jobset" / f"jobset-{JOBSET_VERSION}_go1.26.8"
    (out / "bin").mkdir(parents=True)
    (out / "bin" / JOBSET_BINARY).write_text("#!/bin/sh\n")
    (out / "bin" / JOBSET_BINARY).chmod(0o755)
    (out / ".complete").write_text(f"jobset={JOBSET_VERSION}\nbinaries={listed}\n")
    return out / "bin"


def test_no_build_names_the_build_script(cache: Path) -> None:
    with pytest.raises(BinariesNotFound, match=r"no complete JobSet v0\.11\.0 build .*hack/build-jobset\.sh"):
        find_jobset_bin_dir()


def test_a_complete_build_is_found_and_an_unlisted_binary_is_missing(cache: Path) -> None:
    bin_dir = fake_build(cache, JOBSET_BINARY)
    assert find_jobset_bin_dir() == bin_dir
    (bin_dir.parent / ".complete").write_text(f"jobset={JOBSET_VERSION}\nbinaries=\n")
    with pytest.raises(BinariesNotFound, match=f"missing in {bin_dir}: {JOBSET_BINARY}; build it"):
        find_jobset_bin_dir()


def test_webhooks_are_called_by_url_and_pod_hooks_see_only_jobset_pods() -> None:
    configs = webhook_configurations(4443, b"PEM")
    assert [c["kind"] for c in configs] == ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]
    hooks = {h["name"]: h for c in configs for h in c["webhooks"]}
    assert set(hooks) == {"mjobset.kb.io", "mpod.kb.io", "vjobset.kb.io", "vpod.kb.io"}
    assert hooks["vjobset.kb.io"]["clientConfig"] == {
        "url": "https://127.0.0.1:4443/validate-jobset-x-k8s-io-v1alpha2-jobset",
        "caBundle": base64.b64encode(b"PEM").decode(),
    }
    for name in ("mpod.kb.io", "vpod.kb.io"):
        selector = hooks[name]["objectSelector"]["matchExpressions"]
        assert selector == [{"key": JOBSET_LABEL, "operator": "Exists"}]
    assert "objectSelector" not in hooks["mjobset.kb.io"]
