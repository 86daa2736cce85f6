"""nbgitpuller links that open the course, and each lesson, in JupyterLab on a JupyterHub.

A student who follows a link logs in to the hub; nbgitpuller (installed in the course
image) then clones the repository into their home, or on later clicks pulls it and merges
without overwriting what they changed, and opens the page named by ``urlpath``::

    python -m hub.links --hub https://hub.example.edu --repo https://github.com/ORG/REPO --branch main

prints one line per link: the course (the repository's folder), then every lesson found
in ``release/*/`` (its ``release/<lesson>/<lesson>.ipynb``). nbgitpuller clones into a
folder named like the repository (the last part of its URL), so the links open
``lab/tree/<that folder>/...``.
"""

import argparse
import sys
from pathlib import Path
from urllib.parse import urlencode, urlsplit

COURSE = Path(__file__).resolve().parents[1]


def repo_dir(repo):
    """The folder nbgitpuller clones ``repo`` into: the last part of its URL.

    That is nbgitpuller's default ``targetPath``; a ``.git`` ending is kept, as it does.

    >>> repo_dir("https://github.com/ORG/multi-gpu-course")
    'multi-gpu-course'
    >>> repo_dir("https://github.com/ORG/multi-gpu-course.git/")
    'multi-gpu-course.git'
    """
    name = repo.rstrip("/").split("/")[-1]
    if not name or ":" in name or ("://" in repo and not urlsplit(repo).path.strip("/")):
        raise ValueError(f"cannot tell the repository's name from {repo!r}")
    return name


def lessons(course=COURSE):
    """The lessons of a course directory: every ``release/<lesson>/<lesson>.ipynb``, in order.

    >>> lessons()[0]
    '00_foundations'
    """
    return sorted(p.parent.name for p in Path(course).glob("release/*/*.ipynb")
                  if p.stem == p.parent.name)


def link(hub, repo, branch, path=""):
    """The nbgitpuller link that pulls ``repo`` at ``branch`` and opens ``path`` in JupyterLab.

    ``path`` is relative to the repository (empty: its folder). The query is URL-encoded
    as nbgitpuller's own link generator writes it (``/`` and ``:`` escaped).

    >>> link("https://hub.example.edu", "https://github.com/ORG/course", "main",
    ...      "release/00_foundations/00_foundations.ipynb")
    'https://hub.example.edu/hub/user-redirect/git-pull?repo=https%3A%2F%2Fgithub.com%2FORG%2Fcourse&branch=main&urlpath=lab%2Ftree%2Fcourse%2Frelease%2F00_foundations%2F00_foundations.ipynb'
    """
    parts = urlsplit(hub)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"the hub must be an http(s) URL such as https://hub.example.edu, got {hub!r}")
    if not branch:
        raise ValueError("a branch is needed (nbgitpuller would otherwise take the remote's default)")
    repo = repo.rstrip("/")
    urlpath = "/".join(["lab/tree", repo_dir(repo), *([path.strip("/")] if path.strip("/") else [])])
    query = urlencode({"repo": repo, "branch": branch, "urlpath": urlpath})
    # A hub served under a path prefix (https://example.edu/jupyter/) keeps it.
    return f"{hub.rstrip('/')}/hub/user-redirect/git-pull?{query}"


def links(hub, repo, branch, course=COURSE):
    """(name, link) pairs: the course's folder first, then each lesson's release notebook.

    >>> [name for name, _ in links("https://hub.example.edu", "https://github.com/ORG/course", "main")][:2]
    ['course', '00_foundations']
    """
    found = lessons(course)
    if not found:
        raise ValueError(f"no lessons in {Path(course) / 'release'} (release/<lesson>/<lesson>.ipynb)")
    return [("course", link(hub, repo, branch))] + [
        (lesson, link(hub, repo, branch, f"release/{lesson}/{lesson}.ipynb")) for lesson in found]


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m hub.links", description=__doc__.split("\n\n")[0],
        epilog="Point --repo/--branch at what students may see: the whole repository, "
               "source/ (solutions, hidden tests) included, lands in their home.")
    parser.add_argument("--hub", required=True, help="the hub's URL, e.g. https://hub.example.edu")
    parser.add_argument("--repo", required=True, help="the repository's clone URL, e.g. https://github.com/ORG/REPO")
    parser.add_argument("--branch", default="main", help="the branch to pull (default: main)")
    parser.add_argument("--course", default=str(COURSE), help="where to find release/*/ (default: this checkout)")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown list instead of 'name URL' lines")
    args = parser.parse_args(argv)
    try:
        pairs = links(args.hub, args.repo, args.branch, args.course)
    except ValueError as e:
        parser.error(str(e))
    width = max(len(name) for name, _ in pairs)
    for name, url in pairs:
        print(f"- [{name}]({url})" if args.markdown else f"{name:<{width}}  {url}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
