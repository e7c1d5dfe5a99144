"""Deleting a workspace as a real Honcho allows it: for the evaluation's and tests' own workspaces.

Honcho refuses (409) to delete a workspace that still has an active session, and deletes a
session only by queueing it (202: the session leaves the lists at once, its messages stay until
the server's background worker runs). So each session goes first, then the workspace (202
again). The product itself never deletes: this serves what created synthetic workspaces.
"""

from __future__ import annotations

import httpx

MAX_SESSION_PAGES = 100  # 100 sessions a page: far more than a test or an evaluation creates


def delete_workspace(client: httpx.Client, workspace: str) -> list[str]:
    """Delete `workspace`'s sessions, then it; the ids left (``workspace/sessions/id``), if any.

    `client` carries the base URL and any credentials. A 202 is success and a 404 means already
    gone; any other answer or a transport failure leaves the id in the answer. Never raises.
    """
    try:
        sessions = _session_ids(client, workspace)
    except (httpx.HTTPError, ValueError):
        return [workspace]
    left = []
    for session in sessions:
        if not _deleted(client, f"/v3/workspaces/{workspace}/sessions/{session}"):
            left.append(f"{workspace}/sessions/{session}")
    if not _deleted(client, f"/v3/workspaces/{workspace}"):
        left.append(workspace)
    return left


def _deleted(client: httpx.Client, path: str) -> bool:
    try:
        return client.delete(path).status_code in (202, 404)
    except httpx.HTTPError:
        return False


def _session_ids(client: httpx.Client, workspace: str) -> list[str]:
    """Every active session of `workspace`, page by page (none if it is gone).

    Raises:
        httpx.HTTPError: the server could not be reached.
        ValueError: it answered something other than a page or a 404.
    """
    found: list[str] = []
    for page in range(1, MAX_SESSION_PAGES + 1):
        path = f"/v3/workspaces/{workspace}/sessions/list?page={page}&size=100"
        answer = client.post(path, json={})
        if answer.status_code == 404:
            return found
        if answer.status_code != 200:
            raise ValueError(f"sessions/list answered {answer.status_code}")
        body = answer.json()
        items = body.get("items", []) if isinstance(body, dict) else []
        found += [i["id"] for i in items if isinstance(i, dict) and isinstance(i.get("id"), str)]
        if not items or page >= int(body.get("pages") or 0):
            return found
    return found
