"""Site configuration: parsing and checking directives, the site file, and what reaches the job script."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic.backends.slurm import SlurmBackend, render_job_script
from elastic.batch import JobSpec
from elastic.errors import ConfigError
from elastic.site import (
    RESERVED_OPTIONS,
    SITE_ENV,
    SiteConfig,
    SiteConfigError,
    default_site_path,
    describe,
    load_site,
    parse_directive,
    site_path,
)

FIELD_OPTIONS = ("partition", "account", "qos", "reservation", "mem", "constraint", "gres", "exclusive")

# ------------------------------------------------------------------------------------ directives


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("--comment=my run", ("comment", "my run")),
        ("--comment my run", ("comment", "my run")),
        ('--comment="quoted value"', ("comment", "quoted value")),
        ("--comment='single'", ("comment", "single")),
        ("  #SBATCH   --licenses=fluent:1  ", ("licenses", "fluent:1")),
        ("--requeue", ("requeue", None)),
        ("--mail-type=END,FAIL", ("mail-type", "END,FAIL")),
        ("--mem-per-cpu=2G", ("mem-per-cpu", "2G")),  # not --mem: a different option
        ("--time-min=10", ("time-min", "10")),  # not an abbreviation of --time
    ],
)
def test_good_directives_parse(text: str, expected: tuple[str, str | None]) -> None:
    assert parse_directive(text) == expected


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("-N 2", "long sbatch option starting with '--'"),
        ("nodes=2", "long sbatch option starting with '--'"),
        ("", "long sbatch option starting with '--'"),
        ("--comment=a\nb", "one line"),
        ("--comment=a\r", "one line"),
        ("--Comment=x", "not an sbatch option"),
        ("--comment!=x", "not an sbatch option"),
        ("--=x", "not an sbatch option"),
        ("--a--b=x", "not an sbatch option"),
        ("--comment=", "no value after '='"),
        ('--comment=say "hi"', "double quote or a backslash"),
        ("--comment=a\\b", "double quote or a backslash"),
        ("--nodes=3", "--nodes is set by Elastic for every allocation: the allocation's geometry"),
        ("--ntasks=4", "--ntasks is set by Elastic"),
        ("--time=10", "--time is set by Elastic for every allocation: the walltime"),
        ("--job-name=x", "--job-name is set by Elastic"),
        ("--dependency=afterok:1", "--dependency is set by Elastic"),
        ("--no=2", r"--no \(an abbreviation of --nodes\) is set by Elastic"),
        ("--array=1-10", "--array is set by Elastic"),
        ("--mem=4G", "--mem has its own setting: use mem= instead"),
        ("--part=x", r"--part \(an abbreviation of --partition\) has its own setting: use partition="),
        ("--exclusive", "use exclusive= instead"),
    ],
)
def test_bad_directives_are_refused_naming_the_line(text: str, match: str) -> None:
    with pytest.raises(SiteConfigError, match=match) as info:
        SiteConfig(directives=["--comment=fine", text])
    assert info.value.key == "directives[1]" and info.value.value == text
    assert f"SiteConfig.directives[1] = {text!r}" in str(info.value)
    assert isinstance(info.value, ConfigError)


def test_directives_must_be_a_list_not_one_string() -> None:
    with pytest.raises(SiteConfigError, match=r"must be a list of strings"):
        SiteConfig(directives="--comment=x")  # type: ignore[arg-type]
    with pytest.raises(SiteConfigError, match="a directive is a string"):
        SiteConfig(directives=[3])  # type: ignore[list-item]


def test_a_directive_given_twice_or_conflicting_with_mem_is_refused() -> None:
    with pytest.raises(SiteConfigError, match=r"directives\[1\].*--comment is given twice"):
        SiteConfig(directives=["--comment=a", "--comment b"])
    with pytest.raises(SiteConfigError, match="--mem-per-cpu conflicts with mem='4G'"):
        SiteConfig(mem="4G", directives=["--mem-per-cpu=1G"])


_NAME = st.from_regex(r"[a-z][a-z0-9]{0,8}(-[a-z0-9]{1,6}){0,2}", fullmatch=True)
_VALUE = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp"), blacklist_characters='"\\'),
    min_size=1,
    max_size=30,
).filter(lambda v: v.strip() != "")


def _free(name: str) -> bool:
    """``--name`` is neither Elastic's nor a field's, nor abbreviates one."""
    return not any(o.startswith(name) for o in (*RESERVED_OPTIONS, *FIELD_OPTIONS))


@settings(max_examples=200, deadline=None)
@given(_NAME.filter(_free), _VALUE, st.sampled_from(["=", " "]))
def test_a_rendered_directive_parses_back_to_itself(name: str, value: str, sep: str) -> None:
    parsed = parse_directive(f"--{name}{sep}{value}")
    assert parsed[0] == name
    (rendered,) = SiteConfig(directives=[f"--{name}{sep}{value}"]).sbatch_options()
    assert rendered == f'--{name}="{parsed[1]}"'
    assert parse_directive(rendered) == parsed  # rendering is a fixed point: what Slurm reads is the value


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(sorted(RESERVED_OPTIONS)), st.data())
def test_every_abbreviation_of_a_reserved_option_is_refused(option: str, data: st.DataObject) -> None:
    cut = data.draw(st.integers(1, len(option)))
    name = option[:cut].rstrip("-")
    with pytest.raises(SiteConfigError, match=r"is set by Elastic|has its own setting|not an sbatch option"):
        parse_directive(f"--{name}=1")


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=20), st.sampled_from(["\n", "\r", "\0"]), st.text(max_size=20))
def test_no_directive_with_a_line_break_passes(head: str, brk: str, tail: str) -> None:
    with pytest.raises(SiteConfigError):
        parse_directive(f"--comment={head}{brk}{tail}")


# ------------------------------------------------------------------------------------ typed fields


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"mem": "4 GB"}, "mem = '4 GB': must be a whole number"),
        ({"mem": "4.5G"}, "mem = '4.5G'"),
        ({"partition": "two words"}, "partition = 'two words': must be a non-empty string without spaces"),
        ({"account": ""}, "account = ''"),
        ({"gres": 'gpu"1'}, "gres"),
        ({"exclusive": "yes"}, "exclusive = 'yes': must be true or false"),
        ({"env": {"BAD-NAME": "1"}}, r"env\['BAD-NAME'\].*not a shell variable name"),
        ({"env": {"OMP_NUM_THREADS": 1}}, "quote numbers"),
        ({"env": ["A=1"]}, "must be a mapping"),
        ({"worker_init": ["module load x"]}, "must be a string of shell lines"),
        ({"python": " "}, "python = ' '"),
        ({"python": "py\nthon"}, "python"),
    ],
)
def test_bad_fields_are_refused(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(SiteConfigError, match=match):
        SiteConfig(**kwargs)  # type: ignore[arg-type]


def test_sbatch_options_and_description() -> None:
    site = SiteConfig(
        partition="p",
        reservation="r1",
        mem="8G",
        constraint="intel&ib",
        gres="gpu:1",
        exclusive=True,
        directives=("--comment=a b", "--requeue"),
    )
    assert site.sbatch_options() == [
        '--reservation="r1"',
        '--mem="8G"',
        '--constraint="intel&ib"',
        '--gres="gpu:1"',
        "--exclusive",
        '--comment="a b"',
        "--requeue",
    ]
    assert describe(site)["mem"] == "8G" and "python" not in describe(site)
    assert SiteConfig().empty and not site.empty
    assert SiteConfig(directives=["--requeue"]) == SiteConfig(directives=("--requeue",))


# ------------------------------------------------------------------------------------ the site file

GOOD_FILE = """
partition = "debug"
account = "proj"
mem = "4G"
exclusive = false
directives = ["--comment=from the site file", "#SBATCH --requeue"]
python = "python3"
worker_init = '''
module load python
export FROM_INIT=yes
'''

[env]
OMP_NUM_THREADS = "1"
"""


def test_the_site_file_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "site.toml"
    path.write_text(GOOD_FILE)
    monkeypatch.setenv(SITE_ENV, str(path))
    site = load_site()
    assert site.partition == "debug" and site.account == "proj" and site.python == "python3"
    assert site.directives == ("--comment=from the site file", "#SBATCH --requeue")
    assert site.env == {"OMP_NUM_THREADS": "1"}
    assert site.worker_init.splitlines() == ["module load python", "export FROM_INIT=yes"]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (
            'directives = ["--nodes=2"]',
            r"site.toml: directives\[0\] = '--nodes=2': --nodes is set by Elastic",
        ),
        ('partiton = "x"', "site.toml: partiton = 'x': unknown setting; known: partition, account"),
        ("mem = 4", "site.toml: mem = 4: must be a whole number"),
        ("[env]\nOMP_NUM_THREADS = 1", r"site.toml: env\['OMP_NUM_THREADS'\] = 1: .*quote numbers"),
        ('directives = "--comment=x"', "site.toml: directives = '--comment=x': must be a list"),
        ("partition = ", "site.toml: file = .*not valid TOML"),
    ],
)
def test_a_bad_site_file_names_itself_and_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, match: str
) -> None:
    path = tmp_path / "site.toml"
    path.write_text(text + "\n")
    monkeypatch.setenv(SITE_ENV, str(path))
    with pytest.raises(SiteConfigError, match=match) as info:
        load_site()
    assert info.value.source == str(path)


def test_which_file_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.delenv(SITE_ENV)
    assert default_site_path() == tmp_path / "cfg" / "elastic" / "site.toml"
    assert site_path() is None and load_site() == SiteConfig()  # no file: nothing set
    default_site_path().parent.mkdir(parents=True)
    default_site_path().write_text('qos = "long"\n')
    assert site_path() == default_site_path() and load_site().qos == "long"
    monkeypatch.setenv(SITE_ENV, "")  # set but empty: no file, not even the default
    assert site_path() is None
    monkeypatch.setenv(SITE_ENV, str(tmp_path / "missing.toml"))
    with pytest.raises(SiteConfigError, match=r"ELASTIC_SITE = '.*missing.toml': no such file"):
        site_path()


# ------------------------------------------------------------------------------------ the job script


def test_the_job_script_carries_the_site(tmp_path: Path) -> None:
    site = SiteConfig(
        mem="1G",
        exclusive=True,
        directives=["--comment=site run"],
        env={"SITE_VAR": "from env", "SHARED": "site"},
        worker_init='export FROM_INIT="$SITE_VAR+init"\necho init ran >&2',
    )
    spec = JobSpec(
        cores=2, nodes=1, walltime=60, script="echo $SITE_VAR/$SHARED/$FROM_INIT", env={"SHARED": "job"}
    )
    text = render_job_script(spec, workdir=tmp_path, site=site)
    sbatch = [line.removeprefix("#SBATCH ") for line in text.splitlines() if line.startswith("#SBATCH ")]
    assert sbatch.count("--exclusive") == 1  # the node request already has it
    assert '--mem="1G"' in sbatch and '--comment="site run"' in sbatch
    assert sbatch.index('--comment="site run"') < sbatch.index("--export=ALL")
    # bash reads #SBATCH lines as comments: the script runs as is; the job's env wins, init sees the site's
    done = subprocess.run(["bash", "-c", text], capture_output=True, text=True, check=True)
    assert done.stdout == "from env/job/from env+init\n"
    assert done.stderr == "init ran\n"


def test_slurm_backend_takes_the_site_and_its_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = SiteConfig(partition="p", account="a", qos="q", mem="2G")
    backend = SlurmBackend(site=site, workdir=tmp_path)
    assert (backend.partition_name, backend.account, backend.qos) == ("p", "a", "q")
    text = backend._script(JobSpec(cores=1, walltime=60))
    assert '#SBATCH --partition="p"' in text and '#SBATCH --mem="2G"' in text
    explicit = SlurmBackend("other", site=site, workdir=tmp_path)  # an argument wins over the site
    assert explicit.partition_name == "other" and explicit.account == "a"
    # without site=, the site file
    path = tmp_path / "site.toml"
    path.write_text('account = "from-file"\ndirectives = ["--comment=f"]\n')
    monkeypatch.setenv(SITE_ENV, str(path))
    from_file = SlurmBackend(workdir=tmp_path)
    assert from_file.account == "from-file" and from_file.site.directives == ("--comment=f",)
    path.write_text('directives = ["--ntasks=2"]\n')
    with pytest.raises(SiteConfigError, match="--ntasks is set by Elastic"):
        SlurmBackend(workdir=tmp_path)
    with pytest.raises(ConfigError, match="site must be a SiteConfig"):
        SlurmBackend(site={"mem": "1G"}, workdir=tmp_path)  # type: ignore[arg-type]
    assert os.environ[SITE_ENV] == str(path)


def test_the_slurm_guide_site_file_is_a_valid_site(tmp_path: Path) -> None:
    guide = (Path(__file__).resolve().parents[1] / "docs" / "guide" / "slurm.md").read_text()
    section = guide.split("### Site configuration", 1)[1]
    text = section.split("```toml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "site.toml").write_text(text)
    site = SiteConfig.load(tmp_path / "site.toml")
    assert site.account == "proj123" and site.python == "python3" and site.env == {"OMP_NUM_THREADS": "1"}
    assert '--comment="elastic"' in site.sbatch_options()
    assert "source ~/venvs/elastic/bin/activate" in site.worker_init
