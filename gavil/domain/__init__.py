"""The domain: WinoGAViL's vocabulary and formulas, the name policy, profanity and concreteness
rules, annotator privacy and the permanent-ID ledger. Pure functions over values and tables."""
