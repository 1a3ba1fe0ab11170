"""The database: migrations, both backends' schemas, the writer, crashes and several processes
over one database."""
