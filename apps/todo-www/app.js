// SPDX-License-Identifier: MIT
// app.js: todo's page. It lists, adds, edits and deletes todos through todo's JSON API
// (GET/POST /todos, PATCH/DELETE /todos/:id; errors as application/problem+json) and follows
// GET /events (events created, updated and deleted carrying the todo as stored, and heartbeat
// carrying {todos, last_id}), so every open page shows every change.
"use strict";

const API = ""; // the page is served by todo itself, on the same origin as the API

const todos = new Map(); // id -> {id, title, done}, what the server said last
let pending = null; // events that came while the list was being fetched, applied after it
let source = null;

const $ = (id) => document.getElementById(id);

function say(text) {
  $("status").textContent = text || "";
}

// One request to the API: the parsed JSON body, null for 204; throws an Error whose message is
// the problem's detail (RFC 9457) or the status line.
async function api(method, path, body) {
  const init = { method, headers: { Accept: "application/json" } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const res = await fetch(API + path, init);
  if (res.status === 204) return null;
  const type = res.headers.get("Content-Type") || "";
  const data = type.includes("json") ? await res.json() : null;
  if (!res.ok) {
    const why = data && (data.detail || data.title);
    throw new Error(why ? `${why} (${res.status})` : `${res.status} ${res.statusText}`);
  }
  return data;
}

// ---- the list on the page, drawn from `todos` ----

function render() {
  const list = $("list");
  const editing = list.querySelector("li.editing");
  const keep = editing ? Number(editing.dataset.id) : null;
  const items = [...todos.values()].sort((a, b) => a.id - b.id);
  const have = new Map([...list.children].map((li) => [Number(li.dataset.id), li]));
  for (const [id, li] of have) if (!todos.has(id)) li.remove();
  let prev = null;
  for (const t of items) {
    let li = have.get(t.id);
    if (!li) li = make(t.id);
    if (t.id !== keep) fill(li, t); // a title being edited is left as the user has it
    else li.querySelector(".done").checked = t.done;
    const at = prev ? prev.nextSibling : list.firstChild;
    if (at !== li) list.insertBefore(li, at);
    prev = li;
  }
  const left = items.filter((t) => !t.done).length;
  $("count").textContent = `${left} of ${items.length} left`;
  $("empty").hidden = items.length > 0;
}

function make(id) {
  const li = $("item").content.firstElementChild.cloneNode(true);
  li.dataset.id = String(id);
  li.querySelector(".done").addEventListener("change", (e) => setDone(id, e.target.checked));
  li.querySelector(".delete").addEventListener("click", () => remove(id));
  const title = li.querySelector(".title");
  title.addEventListener("dblclick", () => startEdit(li));
  title.addEventListener("keydown", (e) => {
    if (e.key === "Enter") startEdit(li);
  });
  const edit = li.querySelector(".edit");
  edit.addEventListener("keydown", (e) => {
    if (e.key === "Enter") finishEdit(li, true);
    else if (e.key === "Escape") finishEdit(li, false);
  });
  edit.addEventListener("blur", () => finishEdit(li, true));
  return li;
}

function fill(li, t) {
  li.classList.toggle("is-done", t.done);
  li.querySelector(".done").checked = t.done;
  li.querySelector(".title").textContent = t.title; // text, never markup
}

// ---- what the user does ----

async function add(e) {
  e.preventDefault();
  const input = $("new-title");
  const title = input.value.trim();
  if (!title) return;
  try {
    const t = await api("POST", "/todos", { title });
    todos.set(t.id, t);
    input.value = "";
    say("");
    render();
  } catch (err) {
    say(`Not added: ${err.message}`);
  }
}

async function setDone(id, done) {
  try {
    const t = await api("PATCH", `/todos/${id}`, { done });
    todos.set(t.id, t);
    say("");
  } catch (err) {
    say(`Not changed: ${err.message}`);
  }
  render();
}

async function remove(id) {
  try {
    await api("DELETE", `/todos/${id}`);
    todos.delete(id);
    say("");
  } catch (err) {
    if (/\(404\)$/.test(err.message)) todos.delete(id); // gone already
    else say(`Not deleted: ${err.message}`);
  }
  render();
}

function startEdit(li) {
  const t = todos.get(Number(li.dataset.id));
  if (!t) return;
  const edit = li.querySelector(".edit");
  li.classList.add("editing");
  li.querySelector(".title").hidden = true;
  edit.hidden = false;
  edit.value = t.title;
  edit.focus();
  edit.select();
}

async function finishEdit(li, save) {
  if (!li.classList.contains("editing")) return;
  const id = Number(li.dataset.id);
  const edit = li.querySelector(".edit");
  const title = edit.value.trim();
  li.classList.remove("editing");
  edit.hidden = true;
  li.querySelector(".title").hidden = false;
  const t = todos.get(id);
  if (save && t && title && title !== t.title) {
    try {
      const u = await api("PATCH", `/todos/${id}`, { title });
      todos.set(u.id, u);
      say("");
    } catch (err) {
      say(`Not renamed: ${err.message}`);
    }
  }
  render();
}

// ---- the event stream ----

function apply(name, t) {
  if (name === "deleted") todos.delete(t.id);
  else todos.set(t.id, t);
}

function onChange(e) {
  let t;
  try {
    t = JSON.parse(e.data);
  } catch {
    return;
  }
  if (pending) pending.push([e.type, t]);
  else {
    apply(e.type, t);
    render();
  }
}

// The whole list again; the events that arrive meanwhile are applied on top of it, in order:
// each carries the row as stored, so what ends up shown is the newest state of every row.
async function reload() {
  if (pending) return;
  pending = [];
  try {
    const all = await api("GET", "/todos");
    todos.clear();
    for (const t of all) todos.set(t.id, t);
    for (const [name, t] of pending) apply(name, t);
    say("");
  } catch (err) {
    say(`Could not load the list: ${err.message}`);
  } finally {
    pending = null;
  }
  render();
}

function follow() {
  source = new EventSource(API + "/events");
  for (const name of ["created", "updated", "deleted"]) source.addEventListener(name, onChange);
  // The heartbeat says how many todos there are and the newest id: a page that disagrees missed
  // something (a stream down longer than the server keeps events) and fetches the list again.
  source.addEventListener("heartbeat", (e) => {
    let b;
    try {
      b = JSON.parse(e.data);
    } catch {
      return;
    }
    const newest = todos.size ? Math.max(...todos.keys()) : 0;
    if (!pending && (b.todos !== todos.size || (b.todos > 0 && b.last_id !== newest))) reload();
  });
  let dropped = false;
  source.addEventListener("open", () => {
    $("live").textContent = "live";
    $("live").classList.add("on");
    // back after a drop: the browser resumed with Last-Event-ID; the list is fetched again all
    // the same, which costs one request and covers what the server no longer kept
    if (dropped) reload();
    dropped = false;
  });
  source.addEventListener("error", () => {
    dropped = true;
    $("live").textContent = source.readyState === EventSource.CLOSED ? "offline" : "reconnecting";
    $("live").classList.remove("on");
    if (source.readyState === EventSource.CLOSED) setTimeout(follow, 5000);
  });
}

document.addEventListener("DOMContentLoaded", () => {
  $("add").addEventListener("submit", add);
  follow(); // first, so no change falls between the list and the stream
  reload();
});
