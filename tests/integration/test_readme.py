"""The Python examples of the README and of the documentation site (docs/**/*.md) run as written, against the
real broker.

Every ```python block is a complete program: it is run in a fresh interpreter, with KAFKA_BOOTSTRAP pointing
at the session's broker (the examples read it, defaulting to the `kafkajet broker --port 9092` address), and
must exit 0. A block that needs more than a broker says so in its first comment line (`# needs: ...`).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkajet.testing import EmbeddedBroker
from kafkajet.testing.kdc import LocalKdc, kdc_available
from kafkajet.testing.oidc import OidcProvider
from tests.helpers.tls_proxy import CertificateAuthority

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
# (page, block): every example of the README and of the site's pages.
EXAMPLES = [(page.relative_to(ROOT).as_posix(), block) for page in PAGES
            for block in re.findall(r"^```python\n(.*?)^```", page.read_text(), flags=re.S | re.M)]
BLOCKS = [block for _, block in EXAMPLES]
# An example that reads no KAFKA_BOOTSTRAP talks to no session broker (it starts its own, or only builds a
# client): it runs once, not once per broker kind.
ON_A_BROKER = [(page, block) for page, block in EXAMPLES if "KAFKA_BOOTSTRAP" in block]
WITHOUT_A_BROKER = [(page, block) for page, block in EXAMPLES if "KAFKA_BOOTSTRAP" not in block]


@pytest.fixture
def kdc_example_com() -> Iterator[LocalKdc]:
    """The Kerberos example's realm; without the KDC or the gssapi package the example fails naming what to
    install (a skip would hide a missing dependency)."""
    try:
        import gssapi  # noqa: F401
    except ImportError as e:
        pytest.fail(f"the Kerberos example needs the gssapi package (`pip install 'kafkajet[gssapi]'`): {e}",
                    pytrace=False)
    if not kdc_available():
        pytest.fail("no krb5kdc / kdb5_util / kadmin.local: `make krb5` installs Debian's krb5-kdc, "
                    "krb5-admin-server", pytrace=False)
    with LocalKdc("EXAMPLE.COM") as kdc:
        yield kdc


@pytest.fixture
def identity_provider() -> Iterator[OidcProvider]:
    with OidcProvider({"my-app": "secret"}) as idp:
        yield idp


def _title(block: str) -> str:
    first = next((line for line in block.splitlines() if line.startswith("# ")), block.splitlines()[0])
    return re.sub(r"\W+", "-", first.lstrip("# ").lower()).strip("-")[:40]


def test_the_readme_links_no_file_by_relative_path() -> None:
    # pyproject's readme: the README is the wheel's description on PyPI, where a relative link leads nowhere.
    assert 'readme = "README.md"' in (ROOT / "pyproject.toml").read_text()
    text = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)\s]+)", text) + re.findall(r"<(?:img|a)\s[^>]*(?:src|href)=\"([^\"]+)", text)
    relative = [t for t in targets if not re.match(r"(https?://|mailto:|#)", t)]
    assert relative == [], f"links that only work in the source tree: {relative}"


def test_the_readme_says_what_kafkajet_is_first_and_how_to_install_it() -> None:
    text = (ROOT / "README.md").read_text()
    first_screen = text[:text.index("\n## ")]
    assert first_screen.split("\n\n")[1].startswith("kafkajet is a Kafka producer client for Python")
    for words in ("pip install kafkajet", "'kafkajet[spark]'", "'kafkajet[broker]'", "kafkajet broker --port 9092",
                  ".venv", "make demo", "make test", "max_block_ms"):
        assert words in first_screen, words
    assert "## Layout" not in text and "make mutate" not in text  # for contributors: CONTRIBUTING.md


def test_the_readme_has_its_examples() -> None:
    assert len([page for page, _ in EXAMPLES if page == "README.md"]) >= 2, "the README lost its examples"
    assert len(BLOCKS) >= 15, "the docs lost their Python examples (or their ```python fences)"


def _ids(examples: list[tuple[str, str]]) -> list[str]:
    return [f"{page.removesuffix('.md')}:{_title(block)}" for page, block in examples]


@pytest.mark.parametrize("page,block", ON_A_BROKER, ids=_ids(ON_A_BROKER))
def test_readme_example_runs(page: str, block: str, broker: EmbeddedBroker, tmp_path: Path,
                             request: pytest.FixtureRequest) -> None:
    run_example(page, block, {"KAFKA_BOOTSTRAP": broker.bootstrap_servers}, tmp_path, request)


@pytest.mark.parametrize("page,block", WITHOUT_A_BROKER, ids=_ids(WITHOUT_A_BROKER))
def test_readme_example_without_the_session_broker_runs(page: str, block: str, tmp_path: Path,
                                                        request: pytest.FixtureRequest) -> None:
    run_example(page, block, {}, tmp_path, request)


def run_example(page: str, block: str, extra_env: dict[str, str], tmp_path: Path,
                request: pytest.FixtureRequest) -> None:
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP"}  # only the session broker's, if any
    env.update(PYSPARK_PYTHON=sys.executable, PYTHONPATH=str(ROOT), **extra_env)
    if "needs: a CA file" in block:
        # The security example points at a broker that is not there: it shows the keys, and running it proves
        # they are valid and the files it names load. Connecting for real is tests/integration/test_tls.py's job.
        (tmp_path / "ca.pem").write_text(CertificateAuthority("readme CA").cert_pem)
        env["KAFKA_PASSWORD"] = "secret"
    if "needs: OIDC_CLIENT_SECRET" in block:
        # The client logs in in its constructor, as Java's does: the example's token comes from a local identity
        # provider that knows its client id (the broker is not reached: the example only builds the producer).
        env["OIDC_CLIENT_SECRET"] = "secret"
        idp = request.getfixturevalue("identity_provider")
        env["OIDC_TOKEN_URL"] = idp.token_url
    if "needs: kafkajet[aws] and AWS credentials" in block:
        # A token is signed in the constructor from the environment's credentials: fake ones sign as well
        # (botocore does it locally); no AWS endpoint is reached.
        env.update(AWS_ACCESS_KEY_ID="AKIDEXAMPLE", AWS_SECRET_ACCESS_KEY="wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
        env.pop("AWS_PROFILE", None)
    if "needs: a Kerberos realm" in block:
        # The example's own realm and keytab, so that its literal names hold; the login is real, the broker not.
        kdc = request.getfixturevalue("kdc_example_com")
        keytab = Path(kdc.add_principal("alice"))
        (tmp_path / "alice.keytab").write_bytes(keytab.read_bytes())
        env.update(kdc.env)
    script = tmp_path / "example.py"
    script.write_text(block)
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, f"{page} example failed:\n{block}\n--- stdout\n{out.stdout}\n--- stderr\n{out.stderr}"
