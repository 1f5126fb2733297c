-- The lease table, as lease-sql's Statements::create_table creates it.
-- Rename `leases` as you like; give the store the same table name.
CREATE TABLE IF NOT EXISTS "leases" (
    name       TEXT NOT NULL PRIMARY KEY,
    holder     TEXT,
    fence      INTEGER NOT NULL,
    taken_at   INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
