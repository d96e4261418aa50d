-- Change hints for readers that would otherwise poll (the console's live feed): a commit
-- that wrote worker messages, task events or decisions notifies `executor_changes`, from
-- any host. The payload names the table (schema.table); a reader takes it as a hint only and reads the
-- store after it. Postgres sends one notification per channel and payload per transaction.
CREATE OR REPLACE FUNCTION executor_hint_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('executor_changes', TG_TABLE_SCHEMA || '.' || TG_TABLE_NAME);
    RETURN NULL;
END;
$$;

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_trigger
                   WHERE tgname = 'executor_messages_hint' AND tgrelid = 'executor_messages'::regclass) THEN
        CREATE TRIGGER executor_messages_hint AFTER INSERT ON executor_messages
            FOR EACH STATEMENT EXECUTE FUNCTION executor_hint_change();
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger
                   WHERE tgname = 'executor_events_hint' AND tgrelid = 'executor_events'::regclass) THEN
        CREATE TRIGGER executor_events_hint AFTER INSERT ON executor_events
            FOR EACH STATEMENT EXECUTE FUNCTION executor_hint_change();
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_trigger
                   WHERE tgname = 'executor_decisions_hint' AND tgrelid = 'executor_decisions'::regclass) THEN
        CREATE TRIGGER executor_decisions_hint AFTER INSERT OR UPDATE ON executor_decisions
            FOR EACH STATEMENT EXECUTE FUNCTION executor_hint_change();
    END IF;
END;
$$;
