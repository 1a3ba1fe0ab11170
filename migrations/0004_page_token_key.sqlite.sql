-- 0004: the database's own secret keys.
--
-- page_tokens signs the page tokens handed to clients (HMAC-SHA256), so a token can only be one
-- this database issued: a forged one is refused before its content is read. randomblob() draws
-- from the operating system's randomness through SQLite's VFS. The key never leaves the
-- database; a copy of the database keeps accepting the tokens the original issued.
CREATE TABLE server_keys (
    name  TEXT PRIMARY KEY,
    value BLOB NOT NULL CHECK (length(value) >= 16)
) STRICT, WITHOUT ROWID;

INSERT INTO server_keys (name, value) VALUES ('page_tokens', randomblob(32));
