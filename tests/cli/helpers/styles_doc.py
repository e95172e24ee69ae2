"""A two-adapter document on the embedded tiny base with different answer
styles: six #sql Q&A (SQL statements) and four #tone Q&A (polite chat),
each adapter with its own LoRA shape, and training.gate enabled. Used by
t1004-t1006 and r1004.  usage: styles_doc.py PATH DLM_ID EPOCHS"""
import sys

SQL = [("List all users.", "SELECT * FROM users;"), ("Count the orders.", "SELECT COUNT(*) FROM orders;"),
       ("Show the ten newest posts.", "SELECT * FROM posts ORDER BY created DESC LIMIT 10;"),
       ("Find customers in Paris.", "SELECT * FROM customers WHERE city = 'Paris';"),
       ("Delete expired sessions.", "DELETE FROM sessions WHERE expires < NOW();"),
       ("Sum the invoice totals.", "SELECT SUM(total) FROM invoices;")]
TONE = [("How are you today?", "Very well, thank you kindly!"), ("Can you help me, please?", "Of course, with pleasure."),
        ("Thanks for your time!", "You are most welcome, dear friend."), ("Good morning!", "A lovely morning to you too!")]

if __name__ == "__main__":
    path, did, epochs = sys.argv[1], sys.argv[2], sys.argv[3]
    out = ["---", f"dlm_id: {did}", "dlm_version: 15", "base_model: tiny", "training:", "  sequence_len: 64",
           "  micro_batch_size: 4", "  grad_accum: 1", f"  num_epochs: {epochs}", "  adapters:",
           "    sql: {lora_r: 8, learning_rate: 0.01}",
           "    tone: {lora_r: 4, lora_alpha: 8, learning_rate: 0.02, target_modules: [q_proj, v_proj, o_proj]}",
           "  gate:", "    enabled: true", "    steps: 150", "    lr: 0.003", "    cold_start_floor: 4", "---"]
    for tag, rows in (("sql", SQL), ("tone", TONE)):
        for q, a in rows:
            out += [f"::instruction#{tag}::", "### Q", q, "### A", a, ""]
    open(path, "w").write("\n".join(out) + "\n")
