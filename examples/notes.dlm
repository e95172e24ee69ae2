---
dlm_id: 01JDEM0N0TES000000000000AB
dlm_version: 15
base_model: tiny
training:
  sequence_len: 256
  learning_rate: 0.002
  num_epochs: 8
---

# Lighthouse notes

The old lighthouse on the point was built in 1852 from granite blocks
brought by schooner. Its lamp burned whale oil until 1880, then kerosene,
and was electrified in 1921. The keeper lived in the cottage at its foot
and climbed the one hundred and twelve steps each evening at sunset.

# The keeper's log

Each night the keeper wrote the weather, the ships that passed and the
hours the lamp burned. In the great storm of 1888 the log records waves
breaking over the gallery and the lamp kept lit through the night.
