"""Run at the start of every Python process of `make test`'s PostgreSQL run (this folder is put
on PYTHONPATH): records which storage functions the process calls (memoryd.testing.exercised)."""

from memoryd.testing.exercised import install

install()
